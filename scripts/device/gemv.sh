#!/usr/bin/env bash
# The opt-in M = 1 register GEMV (kernels/gemv_m1.cuh, DSERVE_GEMV_M1=1): its GPU tests (GemmSmallM*, both paths)
# + memcheck, then bench-one-batch A/B (ab.sh) at GEMV_BATCHES (default 1) over the experiment knobs
# (DSERVE_GEMV_SHORT, DSERVE_GEMV_CTAS, DSERVE_GEMV_PRE, DSERVE_GEMV_MIN_ITEMS). Logs: $OUT/*.log.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=$B/ds_ops_cuda_gpu_test
start=$(date +%s)
timeout 100 "$T" --gtest_filter='GemmSmallM*' > "$OUT/tests.log" 2>&1
echo "== tests GemmSmallM* rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/tests.log" | tail -6
start=$(date +%s)
timeout 120 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" --gtest_filter='GemmSmallM*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck GemmSmallM* rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^\[  (PASSED|FAILED) |ERROR SUMMARY" "$OUT/memcheck.log" | tail -4
G=DSERVE_GEMV_M1=1
AB_BATCHES=${GEMV_BATCHES:-1} AB_CONFIGS=${GEMV_CONFIGS:-"base $G $G,DSERVE_GEMV_MIN_ITEMS=64 $G,DSERVE_GEMV_SHORT=1 $G,DSERVE_GEMV_SHORT=1,DSERVE_GEMV_MIN_ITEMS=64 base $G,DSERVE_GEMV_MIN_ITEMS=64"} \
  bash "$(dirname "$0")/ab.sh"
