#!/usr/bin/env bash
# Experiment (branch wip/fp8-staged): the FP8 small-M GEMM staging its weights through shared memory with the first
# round issued before the PDL wait (DSERVE_FP8_STAGED=1). Fp8GemmGpu* tests under it + memcheck, then bench-one-batch
# --quantization fp8 A/B at batch 1 / 8, alternating. Logs: $OUT/*.log.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=$B/ds_ops_cuda_gpu_test
DSERVE_FP8_STAGED=1 timeout 60 "$T" --gtest_filter='Fp8GemmGpu*:Fp8Fixture*' > "$OUT/tests.log" 2>&1
echo "== Fp8GemmGpu*:Fp8Fixture* DSERVE_FP8_STAGED=1 rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/tests.log" | tail -6
DSERVE_FP8_STAGED=1 timeout 60 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" \
  --gtest_filter='Fp8GemmGpu.SmallM*:Fp8GemmGpu.Fused*:Fp8GemmGpu.LinearPair*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tail -1
S=DSERVE_FP8_STAGED=1
AB_EXTRA="--quantization fp8" AB_BATCHES=${STAGED_BATCHES:-1,8} AB_CONFIGS=${STAGED_CONFIGS:-"base $S base $S base $S"} bash "$(dirname "$0")/ab.sh"
