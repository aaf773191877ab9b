#!/usr/bin/env bash
# Issue 7, 2026-11-26 session 11: the new defaults (fused small-M pair + SiLU, prefetch by grid size) under the
# FP8 GEMM / fixture tests, the dense FP8 GEMM table with the default prefetch, and V2-Lite FP8 decode with
# DSERVE_FP8_PREFETCH unset / all / first (batch 1 and 64, input 512, output 32), same run.
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='Fp8GemmGpu.*:Fixtures/Fp8FixtureGpu.*:MoeFp8Test.*' \
  > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|FP8FIXTURE gpu native (w8a8|fused)" "$OUT/tests.log" | tail -20
timeout 60 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm_auto.csv" > "$OUT/fp8_gemm_auto.log" 2>&1
echo "== bench prefetch=auto rc=$?"; grep ",ours," "$OUT/fp8_gemm_auto.csv" | cut -d, -f2,3,7,10 | tr '\n' ' '; echo
for v in auto all first; do
  env DSERVE_FP8_PREFETCH=$v timeout 120 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 1,64 \
    --input-len 512 --output-len 32 > "$OUT/b1b_$v.log" 2>&1
  echo "== prefetch=$v rc=$? decode b1/b64: $(grep -E "^Decode\.  median" "$OUT/b1b_$v.log" | awk "{print \$4}" | tr '\n' ' ')"
done
