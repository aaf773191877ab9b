#!/usr/bin/env bash
# Issue 7: DSERVE_FP8_FUSED_SMALL_M=1 (written 2026-11-26 without a device: the small-M FP8 kernel quantizing its
# own activations at M <= 8, the q / kv_a pair in one launch, the SiLU in the gate|up GEMM's epilogue). Tests
# (Fp8GemmGpu.*, Fp8FixtureGpu.*), compute-sanitizer memcheck on the new cases, then V2-Lite bench-one-batch FP8
# with the switch off / on (batch 1 and 64, input 512, output 32; ~60 s each), same run.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='Fp8GemmGpu.*:Fixtures/Fp8FixtureGpu.*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|FP8FIXTURE gpu native fused" "$OUT/tests.log" | tail -20
timeout 120 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='Fp8GemmGpu.FusedSmallMQuantizesAsQuantAct:Fp8GemmGpu.FusedPairMatchesTwoLinears:Fp8GemmGpu.FusedSiluMatchesTheReference' \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for f in 0 1; do
  env DSERVE_FP8_FUSED_SMALL_M=$f timeout 170 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 1,64 \
    --input-len 512 --output-len 32 > "$OUT/b1b_fused$f.log" 2>&1
  echo "== b1b fp8 fused small-M=$f rc=$?"; grep -E "weights:|^Prefill|median" "$OUT/b1b_fused$f.log" | head -6
done
