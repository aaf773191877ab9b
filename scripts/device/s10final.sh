#!/usr/bin/env bash
# Issue 7, session 10's last run: the FP8 MoE tests after the defaults changed (segmented prefill on, down-product
# column tiles 4 up to 8 rows), dserve_fp8_gemm_bench (dense small-M kernel after the whole-sector loads), and
# V2-Lite bench-one-batch FP8 (defaults) next to bf16 (s10perf.sh).
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 stdbuf -oL "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.SegmentedPrefill*:MoeFp8Test.SmallMColumn*:MoeFp8Test.V2Lite*:MoeFp8Test.V3Layer*:MoeFp8Test.CapturedInGraph:MoeFp8Test.MatchesCpuSmallDims:Fp8GemmGpu.*' \
  > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|MOEFP8" "$OUT/tests.log" | tail -60
timeout 70 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm.csv" > "$OUT/fp8_gemm.log" 2>&1
echo "== fp8_gemm_bench rc=$?"; cat "$OUT/fp8_gemm.csv" 2>/dev/null | head -60
VARIANTS="fp8 1|bf16 0" OUT="$OUT" bash scripts/device/s10perf.sh
