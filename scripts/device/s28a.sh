#!/usr/bin/env bash
# Session 28, second call (after s27a.sh showed the graph arena green and faster): s27b.sh's second A/B round (arena,
# PDL join fence), then the FP8 decode switches that lost on the H200 in session 26 (s26e.sh), measured again with the
# arena on, since two thirds of the kernel boundaries they were judged on could not overlap then. Two rounds.
set -u
source "$(dirname "$0")/lib.sh"
bash "$(dirname "$0")/s27b.sh"
AR=DSERVE_GRAPH_ARENA=1
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
    AB_CONFIGS="$AR $AR,DSERVE_FP8_FUSED_NORM=1 $AR,DSERVE_FP8_FUSED_SMALL_M=qps $AR,DSERVE_MOE_GATE_ROUTE=1" \
    OUT=$OUT/sw$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
  AB_BATCHES=1,8 AB_CONFIGS="$AR $AR,DSERVE_MOE_GATE_ROUTE=1" \
    OUT=$OUT/swb$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
