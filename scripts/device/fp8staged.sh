#!/usr/bin/env bash
# The FP8 small-M GEMM's two kernel families at <= 16 tokens: weights staged through shared memory with the first
# round issued before the PDL wait (the default) and held in registers (DSERVE_FP8_STAGED=0). Fp8GemmGpu* /
# Fp8Fixture* tests + memcheck on the default, then bench-one-batch --quantization fp8 A/B at batch 1 / 8,
# alternating. Logs: $OUT/*.log.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=$B/ds_ops_cuda_gpu_test
timeout 60 "$T" --gtest_filter='Fp8GemmGpu*:Fp8Fixture*' > "$OUT/tests.log" 2>&1
echo "== Fp8GemmGpu*:Fp8Fixture* rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/tests.log" | tail -6
timeout 60 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" \
  --gtest_filter='Fp8GemmGpu.SmallM*:Fp8GemmGpu.Fused*:Fp8GemmGpu.LinearPair*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tail -1
R=DSERVE_FP8_STAGED=0
AB_EXTRA="--quantization fp8" AB_BATCHES=${STAGED_BATCHES:-1,8} AB_CONFIGS=${STAGED_CONFIGS:-"base $R base $R"} bash "$(dirname "$0")/ab.sh"
