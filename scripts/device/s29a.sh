#!/usr/bin/env bash
# Prepared in session 28 for the next session's first call: decode switches judged before the graph arena (when two
# thirds of a graphed step's kernel boundaries were full drains whatever PDL did), A/B again with it (the default
# since session 28). bench-one-batch V2-Lite dummy, batch 1 and 8: FP8 base, the shared expert on the main stream
# (DSERVE_SIDE_STREAM=0: no SM contention between the two MoE chains, see BENCHMARKS "Session 28"), the register
# GEMV at batch 1 (DSERVE_GEMV_M1=1), the shared add apart (DSERVE_MOE_FUSED_SHARED=0), the split combine without the
# W_UV product (DSERVE_MLA_COMBINE_VC=0), the MoE sum in its own launch (DSERVE_MOE_NORM_FUSED=0); bf16 base,
# DSERVE_SIDE_STREAM=0, DSERVE_GEMV_M1=1. Binary: dserve. ~260 s.
set -u
source "$(dirname "$0")/lib.sh"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
  AB_CONFIGS="base DSERVE_SIDE_STREAM=0 DSERVE_GEMV_M1=1 DSERVE_MOE_FUSED_SHARED=0 DSERVE_MLA_COMBINE_VC=0 DSERVE_MOE_NORM_FUSED=0" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_SIDE_STREAM=0 DSERVE_GEMV_M1=1" OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" |
  grep -E "^==|Decode\.  median"
