#!/usr/bin/env bash
# Issue 7, session 9's blind CUDA work, tests: the FP8 MoE prefill with the routed rows quantized once per layer
# (DSERVE_MOE_FP8_SEGMENTED=1), the norms' FP8 activations (DSERVE_FP8_FUSED_NORM=1), the shared expert added in the
# routed combine (DSERVE_MOE_FUSED_SHARED=1), linear_pair's shared
# quantization and PDL on the dense FP8 kernels: MoeFp8Test (incl. SegmentedPrefillMatchesPerExpert,
# NormQuantizationFeedsTheFp8Ops), Fp8GemmGpu (incl. LinearPairSharesTheQuantization), RmsNorm*, then memcheck on
# the new cases. Timings: s10perf.sh, blind9dec.sh. Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "${SKIP_TESTS:-0}" != 1 ]; then  # SKIP_TESTS=1 after gpusuite.sh in the same call
  timeout 240 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.*:Fp8GemmGpu.*:RmsNorm*' > "$OUT/tests.log" 2>&1
  echo "== MoeFp8Test + Fp8GemmGpu + RmsNorm rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|segmented" "$OUT/tests.log" | tail -30
fi
DSERVE_TEST_NO_TIMING=1 timeout 200 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.SegmentedPrefillMatchesPerExpert:MoeFp8Test.NormQuantizationFeedsTheFp8Ops:MoeFp8Test.FusedSharedAddMatchesTheJoinAndAdd:MoeFp8Test.SmallMColumnTilesAgree:RmsNormQuantGpu.*:Fp8GemmGpu.LinearPair*' \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
