#!/usr/bin/env bash
# The small-M GEMMs' pre-wait weight loads (default) against the L2-prefetch kernels (DSERVE_SMALL_M_PREWAIT=0):
# GemmSmallM* tests under both, memcheck, then bench-one-batch A/B at PREWAIT_BATCHES (default 1,8), alternating
# three times. Logs: $OUT/*.log.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=$B/ds_ops_cuda_gpu_test
for mode in 1 0; do
  DSERVE_SMALL_M_PREWAIT=$mode timeout 100 "$T" --gtest_filter='GemmSmallM*' > "$OUT/tests_$mode.log" 2>&1
  echo "== GemmSmallM* DSERVE_SMALL_M_PREWAIT=$mode rc=$?"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/tests_$mode.log" | tail -4
done
timeout 120 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" --gtest_filter='GemmSmallM*' \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"
grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tail -2
P=DSERVE_SMALL_M_PREWAIT=0
AB_BATCHES=${PREWAIT_BATCHES:-1,8} AB_CONFIGS="base $P base $P base $P" bash "$(dirname "$0")/ab.sh"
