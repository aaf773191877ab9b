#!/usr/bin/env bash
# Prepared in session 29 for the next session's first call (~330 s; binaries dserve, ds_ops_cuda_gpu_test,
# libds_cupti_trace.so). (1) The whole GPU suite: session 29's last commit (FP8 decode norms quantize x at <= 8
# rows only, MoeFp8Test.NormQuantizationFeedsTheFp8Ops checking rows 8 / 16) was compiled, not run. (2) The old
# decode switches again on session 29's schedule (the shared MLP forked after the routing at FP8 batch <= 8):
# the fused router + routing (DSERVE_MOE_GATE_ROUTE=1), the join launched with PDL (DSERVE_PDL_JOIN_FENCE=0), stream
# priorities (main first / side first), the shared add apart (DSERVE_MOE_FUSED_SHARED=0); FP8 batch 1 / 8.
# (3) The FP8 batch-1 trace on the new default, one MoE layer's timeline.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite timeout 200 bash "$(dirname "$0")/gpusuite.sh"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
  AB_CONFIGS="base DSERVE_MOE_GATE_ROUTE=1 DSERVE_PDL_JOIN_FENCE=0 DSERVE_STREAM_PRIORITY=1 DSERVE_STREAM_PRIORITY=2 DSERVE_MOE_FUSED_SHARED=0 base" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
OUT=$OUT/trace TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline rms_norm_vec_kernel<1,true> 12" bash "$(dirname "$0")/trace.sh" | sed -n '/^timeline/,$p'
