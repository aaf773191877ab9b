#!/usr/bin/env bash
# Session 25, final binaries: the FP8 MoE small-M kernel's first weight round before the PDL wait where the slot
# records are settled (gate|up too). The whole GPU suite, then bench-one-batch (V2-Lite dummy, --quantization fp8,
# batch 1 and 8) alternating default / DSERVE_MOE_FP8_SETTLED=0 (the down GEMM's early slot read only), twice.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_MOE_FP8_SETTLED=0" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
