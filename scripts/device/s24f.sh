#!/usr/bin/env bash
# Session 24, last call: the gated FP8 MoE small-M kernel held to four CTAs per SM past one token only (final
# binaries). FP8 MoE and fixture GPU tests, then bench-one-batch (V2-Lite, dummy, --quantization fp8, batch 1 and 8)
# alternating: default / DSERVE_MOE_FP8_GATE_OCC=0, twice.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='MoeFp8Test.*:*Fp8Fixture*' timeout 150 "$B/ds_ops_cuda_gpu_test" > "$OUT/tests.log" 2>&1
echo "== gpu tests rc=$?"; grep -E "^\[  (FAILED|PASSED) |tests ran" "$OUT/tests.log" | tail -8
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_MOE_FP8_GATE_OCC=0" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
