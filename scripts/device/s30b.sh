#!/usr/bin/env bash
# Prepared in session 29 (~300 s; binaries dserve, libds_cupti_trace.so): the old decode switches again on session
# 29's schedule (the shared MLP forked after the routing at FP8 batch <= 8): the fused router + routing
# (DSERVE_MOE_GATE_ROUTE=1), the join launched with PDL (DSERVE_PDL_JOIN_FENCE=0), stream priorities (main first /
# side first), the shared add apart (DSERVE_MOE_FUSED_SHARED=0); FP8 batch 1 / 8. Then the FP8 batch-1 trace on
# the default, one MoE layer's timeline.
set -u
source "$(dirname "$0")/lib.sh"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
  AB_CONFIGS="base DSERVE_MOE_GATE_ROUTE=1 DSERVE_PDL_JOIN_FENCE=0 DSERVE_STREAM_PRIORITY=1 DSERVE_STREAM_PRIORITY=2 DSERVE_MOE_FUSED_SHARED=0 base" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
OUT=$OUT/trace TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline rms_norm_vec_kernel<1,true> 12" bash "$(dirname "$0")/trace.sh" | sed -n '/^timeline/,$p'
