#!/usr/bin/env bash
# Issue 7: the block-FP8 MoE path (kernels/moe_fp8.h) under DSERVE_FP8_NATIVE=1: its consistency and graph tests
# (with the V2-Lite FP8 MoE layer timing, MOEFP8BW lines), the FP8 / MoE suites the change touched as
# regressions, and compute-sanitizer memcheck over the small-dims and graph cases.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.*' > "$OUT/tests.log" 2>&1
echo "== moe fp8 tests rc=$?"; grep -E "^\[ *(OK|FAILED|RUN) |MOEFP8BW|Failure|ERR moe" "$OUT/tests.log" | head -60
# A/B: the down product's CTAs with one n8 column tile instead of two (DSERVE_MOE_FP8_DOWN_TILES).
DSERVE_MOE_FP8_DOWN_TILES=1 timeout 100 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.V2LiteDecodeBandwidth' \
  > "$OUT/down1.log" 2>&1
echo "== down tiles 1 rc=$?"; grep -E "MOEFP8BW|FAILED" "$OUT/down1.log"
timeout 120 stdbuf -oL "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='Fp8GemmGpu.ActivationQuantizationIsBitExact:Fp8GemmGpu.SmallMKernelMatchesReference:*MoeGrouped*:Fp8FixtureGpu.*' \
  > "$OUT/regress.log" 2>&1
echo "== regression tests rc=$?"; grep -E "^\[ *(OK|FAILED) |FP8FIXTURE|MOEBW|Failure" "$OUT/regress.log" | head -30
timeout 150 compute-sanitizer --tool memcheck "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.MatchesCpuSmallDims:MoeFp8Test.CapturedInGraph' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -5
