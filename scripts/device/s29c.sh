#!/usr/bin/env bash
# Session 29, third call: the shared MLP forked after the routing (DSERVE_SHARED_AFTER_ROUTE=1, ModelOptions::
# shared_after_route), so the router / routing / routed quant launches do not share SMs with its weight stream.
# The fixture GPU tests (incl. FixtureGpuTest.SharedAfterRouteMatchesTheDefaultSchedule), bench-one-batch V2-Lite
# dummy FP8 batch 1 / 8, base vs after-route alone and with the fused quantizations, bf16 base vs after-route,
# then the FP8 batch-1 trace with it (one layer's timeline). Binaries: dserve, ds_ops_cuda_gpu_test,
# libds_cupti_trace.so.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*Fixture*:*CudaGraph*' SUITE_LIMIT=150 OUT=$OUT/suite timeout 170 bash "$(dirname "$0")/gpusuite.sh"
grep -h "shared after route" "$OUT"/suite/*.log
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
  AB_CONFIGS="base DSERVE_SHARED_AFTER_ROUTE=1 DSERVE_SHARED_AFTER_ROUTE=1,DSERVE_FP8_FUSED_NORM=1 DSERVE_SHARED_AFTER_ROUTE=1,DSERVE_FP8_FUSED_SMALL_M=qps base DSERVE_SHARED_AFTER_ROUTE=1" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_SHARED_AFTER_ROUTE=1 base DSERVE_SHARED_AFTER_ROUTE=1" OUT=$OUT/ab \
  bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
DSERVE_SHARED_AFTER_ROUTE=1 OUT=$OUT/trace_late TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline rms_norm_vec_kernel<1,true> 12" bash "$(dirname "$0")/trace.sh" |
  sed -n '/^timeline/,$p'
