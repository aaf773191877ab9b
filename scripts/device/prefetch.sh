#!/usr/bin/env bash
# Issue 7: the dense FP8 small-M GEMM's L2 prefetch before the PDL wait, every block (default) vs the first blocks
# only (DSERVE_FP8_PREFETCH=first), dserve_fp8_gemm_bench both ways in one run, after Fp8GemmGpu.* under the
# latter. Not yet run (written 2026-11-26 when the session's device time was spent).
set -u
source "$(dirname "$0")/lib.sh"
DSERVE_FP8_PREFETCH=first timeout 40 "$B/ds_ops_cuda_gpu_test" --gtest_filter='Fp8GemmGpu.*' > "$OUT/tests.log" 2>&1
echo "== Fp8GemmGpu rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/tests.log"
for v in all first; do
  DSERVE_FP8_PREFETCH=$v timeout 60 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm_$v.csv" > "$OUT/fp8_gemm_$v.log" 2>&1
  echo "== bench prefetch=$v rc=$?"; grep ",ours," "$OUT/fp8_gemm_$v.csv" | cut -d, -f2,3,7,10 | tr '\n' ' '; echo
done
