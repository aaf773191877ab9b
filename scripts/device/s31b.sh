#!/usr/bin/env bash
# Session 31 (~200 s; binaries dserve, libds_cupti_trace.so): (1) the bf16 batch-1 trace, one MoE layer's timeline
# (issue 6: where bf16's ~79 us a layer goes); (2) shared-experts fusion (the shared MLP as extra routed experts in
# the walk: no side stream) against the current defaults, FP8 and bf16, batch 1 / 8 - last measured in session 28,
# before the after-route fork, the PDL join and main-first priority.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/trace TRACE_BS=1 TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$(dirname "$0")/trace.sh" | sed -n '/^per decode step/,/total kernel/p;/^timeline/,$p'
AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_SHARED_EXPERTS_FUSION=1" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_SHARED_EXPERTS_FUSION=1" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
