#!/usr/bin/env bash
# Session 30 (~280 s; binary dserve): s30b's single round had the join launched with PDL (DSERVE_PDL_JOIN_FENCE=0)
# at FP8 batch 1 1.74 ms vs 1.78-1.80 base and the main stream first (DSERVE_STREAM_PRIORITY=1) 1.76. Two
# alternating rounds of base / JOIN_FENCE=0 / both at FP8 batch 1 / 8, then bf16 base / JOIN_FENCE=0 twice.
set -u
source "$(dirname "$0")/lib.sh"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
  AB_CONFIGS="base DSERVE_PDL_JOIN_FENCE=0 DSERVE_PDL_JOIN_FENCE=0,DSERVE_STREAM_PRIORITY=1 base DSERVE_PDL_JOIN_FENCE=0 DSERVE_PDL_JOIN_FENCE=0,DSERVE_STREAM_PRIORITY=1" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_PDL_JOIN_FENCE=0 base DSERVE_PDL_JOIN_FENCE=0" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
