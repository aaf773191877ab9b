#!/usr/bin/env bash
# Session 18's third call: MoE slot records. The MoE, fixture and graph tests (and memcheck on the MoE ones), then
# bench-one-batch batch 1 / 8 / 64 alternating the binary without slot records (dserve_base) and with (dserve).
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
OUT=$OUT/suite GTEST_FILTER='Moe*:*Fixture*:CudaGraph*:FastKernels*:MlaFused*' bash "$(dirname "$0")/gpusuite.sh"
timeout 200 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeGroupedTest.*:FastKernelsTest.MoePermute:MoeGemm*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"
grep -E "ERROR SUMMARY|^\[  PASSED|^\[  FAILED" "$OUT/memcheck.log" | tail -6
AB_BATCHES=1,8,64 AB_BINS="dserve_base dserve" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1 AB_REPS=1 AB_BINS="dserve_base dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
