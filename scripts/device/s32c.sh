#!/usr/bin/env bash
# Session 32 (~330 s; binary dserve): where the one-CTA / latency kernels let the next launch start. The s32b trace
# shows the MoE-summing norm ending 3.8 us after the routed down (the plain norm: 1.3 us after o_proj) while the
# q / kv_a pair GEMM behind it starts its pre-wait weight stream (15 MB bf16) as soon as the norm passes its wait:
# the norm's one round of L2 reads may queue behind that stream. DSERVE_PDL_LATE moved the trigger after the loads.
# Measured as no gain (BENCHMARKS 'Session 32'), so the switch was not kept: this script needs that build.
set -u
source "$(dirname "$0")/lib.sh"
L=DSERVE_PDL_LATE
AB_BATCHES=1,8 AB_CONFIGS="base $L=moenorm $L=moenorm_end $L=combine $L=moenorm+norm+combine base $L=moenorm $L=moenorm_end $L=combine $L=moenorm+norm+combine" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base $L=moenorm $L=moenorm+norm+combine" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
