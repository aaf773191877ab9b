#!/usr/bin/env bash
# Prepared in session 30 (~200 s; binaries dserve, libds_cupti_trace.so): (1) bf16 with the main stream first
# (DSERVE_STREAM_PRIORITY=1) now that the join launches with PDL: session 30's round was cut by its call's limit,
# and bf16 keeps neither stream first until measured; two rounds alternating, batch 1 / 8. (2) FP8 batch 1 / 8 / 64
# on the new defaults. (3) The FP8 batch-1 trace on the new defaults, one MoE layer's timeline.
set -u
source "$(dirname "$0")/lib.sh"
AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_STREAM_PRIORITY=1 base DSERVE_STREAM_PRIORITY=1" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8,64 AB_CONFIGS="base" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
OUT=$OUT/trace TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline rms_norm_vec_kernel<1,true> 12" bash "$(dirname "$0")/trace.sh" | sed -n '/^timeline/,$p'
