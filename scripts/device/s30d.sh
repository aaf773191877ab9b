#!/usr/bin/env bash
# Session 30, last call (~200 s after the suite; binary dserve): the new defaults (the join launched with PDL, main
# stream first) against the old ones (DSERVE_PDL_JOIN_FENCE=1,DSERVE_STREAM_PRIORITY=0) at FP8 batch 1 / 8, two
# rounds alternating; bf16 the same plus main-first alone off (DSERVE_STREAM_PRIORITY=0), to see whether bf16
# wants the priority (session 28: bf16 2.15 / 5.82 with it vs 2.13 / 5.79, join fenced).
set -u
source "$(dirname "$0")/lib.sh"
OLD=DSERVE_PDL_JOIN_FENCE=1,DSERVE_STREAM_PRIORITY=0
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base $OLD base $OLD" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_STREAM_PRIORITY=0 $OLD base DSERVE_STREAM_PRIORITY=0 $OLD" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
