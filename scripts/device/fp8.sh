#!/usr/bin/env bash
# Native block-FP8 (issue 7): the fp8 CUDA-vs-CPU consistency tests (ds_ops_cuda_gpu_test --gtest_filter
# 'Fp8GemmGpu.*'), compute-sanitizer memcheck on the fast ones, then dserve_fp8_gemm_bench at DeepSeek-V3
# shapes. Binaries: .devbin/fp8/ (else .devbin/). Logs: $OUT/fp8_test.log, fp8_memcheck.log, fp8_gemm.log,
# fp8_gemm.csv. Keeps going after a failure; under 3 minutes.
set -u
source "$(dirname "$0")/lib.sh"
B=.devbin/fp8
[ -x "$B/ds_ops_cuda_gpu_test" ] || [ -x "$B/dserve_fp8_gemm_bench" ] || B=.devbin
SUM=$OUT/fp8_summary.log
: > "$SUM"

step() {  # name seconds log cmd...
  local name=$1 secs=$2 log=$3
  shift 3
  local start=$(date +%s)
  if [ ! -x "$1" ]; then
    echo "== $name: missing $1" | tee -a "$SUM"
    return
  fi
  timeout --kill-after=5 "$secs" "$@" > "$log" 2>&1
  local rc=$?
  echo "== $name rc=$rc ($(( $(date +%s) - start )) s) -> $log" | tee -a "$SUM"
}

step tests 150 "$OUT/fp8_test.log" "$B/ds_ops_cuda_gpu_test" --gtest_filter='Fp8GemmGpu.*:Fp8FixtureGpu.*'
grep -E "^(LAYOUT|ERR |FP8FIXTURE)|FAILED|PASSED" "$OUT/fp8_test.log" | head -90 >> "$SUM"
# If the default cuBLASLt scale layout (1) did not match but another did, rerun the cuBLASLt-dependent tests
# and the bench with that one (DSERVE_FP8_LT_LAYOUT; the fix is then to change the default).
L=$(grep -m1 -E '^LAYOUT [0-9]+ MATCH' "$OUT/fp8_test.log" | awk '{print $2}')
if [ -n "$L" ] && [ "$L" != 1 ]; then
  export DSERVE_FP8_LT_LAYOUT=$L
  echo "== default layout did not match; using DSERVE_FP8_LT_LAYOUT=$L" | tee -a "$SUM"
  step tests_layout$L 30 "$OUT/fp8_test_layout.log" "$B/ds_ops_cuda_gpu_test" \
    --gtest_filter='Fp8GemmGpu.CublasLtMatchesReference:Fp8GemmGpu.AutoDispatchBothSides:Fp8GemmGpu.PreparedHooksInferUe8m0'
  grep -E "^ERR .*FAILED|FAILED|PASSED" "$OUT/fp8_test_layout.log" | head -20 >> "$SUM"
fi
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$CS" ]; then
  step memcheck 60 "$OUT/fp8_memcheck.log" "$CS" --tool memcheck --error-exitcode 9 \
    "$B/ds_ops_cuda_gpu_test" --gtest_filter='Fp8GemmGpu.ActivationQuantizationIsBitExact:Fp8GemmGpu.CublasLtScaleLayoutProbe:Fp8GemmGpu.AutoDispatchBothSides:Fp8GemmGpu.SmallMChunkedBeyond64:Fp8GemmGpu.TransposeBf16IsExact'
  tail -3 "$OUT/fp8_memcheck.log" >> "$SUM"
else
  echo "== memcheck: no compute-sanitizer" | tee -a "$SUM"
fi
step bench 55 "$OUT/fp8_gemm.log" "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm.csv"
grep -E "^device|FAILED" "$OUT/fp8_gemm.log" >> "$SUM"
cat "$SUM"
