#!/usr/bin/env bash
# Session 25: the FP8 MoE decode kernel as a two-stage walk of resident CTAs (DSERVE_MOE_FP8_PIPE=1): MoE FP8 and
# fixture GPU tests with it on (sharded), then bench-one-batch (V2-Lite dummy, --quantization fp8, batch 1 and 8)
# alternating default / on, twice.
set -u
source "$(dirname "$0")/lib.sh"
SUITE_LIMIT=110 DSERVE_MOE_FP8_PIPE=1 GTEST_FILTER='MoeFp8Test.*:*Fp8Fixture*' OUT=$OUT/tests bash "$(dirname "$0")/gpusuite.sh"
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_MOE_FP8_PIPE=1" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
