#!/usr/bin/env bash
# Session 24: FP8 activations from their producers at decode sizes. The norm's quantization (DSERVE_FP8_FUSED_NORM=1)
# now feeds the q / kv_a pair and the SiLU gate|up in their one launch (before: those two quantized x again), so a
# layer can drop its quant_act launches. GPU tests of those paths, then bench-one-batch (V2-Lite, dummy,
# --quantization fp8, batch 1 and 8) alternating: base / fused norm / in-kernel quantization (FUSED_SMALL_M=qps) /
# both, twice.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='MoeFp8Test.*:Fp8Gemm*:*Fp8*Gemm*' timeout 200 "$B/ds_ops_cuda_gpu_test" > "$OUT/tests.log" 2>&1
echo "== gpu tests rc=$?"; grep -E "^\[  (FAILED|PASSED) |tests ran" "$OUT/tests.log" | tail -8
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
    AB_CONFIGS="base DSERVE_FP8_FUSED_NORM=1 DSERVE_FP8_FUSED_SMALL_M=qps DSERVE_FP8_FUSED_NORM=1,DSERVE_FP8_FUSED_SMALL_M=qps" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
