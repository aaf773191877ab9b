#!/usr/bin/env bash
# Session 28, fifth call: shared-experts fusion now opt-in (DSERVE_SHARED_EXPERTS_FUSION=1; s28c measured it slower).
# The GPU tests the change touches (fixtures incl. the new fused score test, grouped / FP8 MoE, the routing kernels,
# the norm's MoE sum, graphs), then bench-one-batch V2-Lite FP8 and bf16 batch 1 and 8 on the default (apart) path:
# the routing kernels changed for everyone. Binaries: dserve, ds_ops_cuda_gpu_test.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*Fixture*:*MoeGrouped*:*RmsNorm*:*FastKernels*:*CudaGraph*:*MoeFp8*' SUITE_LIMIT=150 OUT=$OUT/suite \
  timeout 170 bash "$(dirname "$0")/gpusuite.sh"
grep -h "fused shared experts" "$OUT"/suite/*.log
for q in "--quantization fp8" ""; do
  AB_EXTRA="$q" AB_BATCHES=1,8 AB_CONFIGS="base" OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
