#!/usr/bin/env bash
# Experiment (branch wip/prewait-weights): small-M GEMMs with their first round of weights issued into shared
# memory before the PDL wait and a smaller CTA (DSERVE_SMALL_M_PREWAIT=1). GemmSmallM* tests + memcheck, then
# bench-one-batch A/B at batch 1 and 8, alternating. Logs: $OUT/*.log.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=$B/ds_ops_cuda_gpu_test
start=$(date +%s)
timeout 100 "$T" --gtest_filter='GemmSmallM*' > "$OUT/tests.log" 2>&1
echo "== tests GemmSmallM* rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/tests.log" | tail -6
DSERVE_SMALL_M_PREWAIT=1 timeout 120 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" \
  --gtest_filter='GemmSmallMTest.WeightRowsMatchTheHostProduct' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"
grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tail -2
P=DSERVE_SMALL_M_PREWAIT=1
AB_BATCHES=${PREWAIT_BATCHES:-1,8} AB_CONFIGS="base $P base $P base $P" bash "$(dirname "$0")/ab.sh"
