#!/usr/bin/env bash
# Session 51, measurement for the next session (no default changed): FP8 prefill of 256 / 512 / 1024 tokens (batch
# 1 / 2 / 4 x 256) runs the MoE on the pipelined tile (emulated e4m3 mma.sync) past 256 tokens; the wgmma walk there
# instead: DSERVE_MOE_WALK_MAX_TOKENS=1024 with the rows-an-expert bound at 64 (512 tokens walk) or 128 (both).
set -u
source "$(dirname "$0")/lib.sh"
AB_BATCHES=1,2,4 AB_KINDS="fp8" AB_BINS="base w64 w128" \
  AB_CFG_w64=DSERVE_MOE_WALK_MAX_TOKENS=1024,DSERVE_MOE_WALK_ROWS_PER_EXPERT=64 \
  AB_CFG_w128=DSERVE_MOE_WALK_MAX_TOKENS=1024,DSERVE_MOE_WALK_ROWS_PER_EXPERT=128 AB_ROUNDS=2 AB_GREP="^==|Prefill|Decode\.  median" \
  bash "$(dirname "$0")/abbin.sh" | sed -n '1,200p'
