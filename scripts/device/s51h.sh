#!/usr/bin/env bash
# Session 51: FP8 at batch 256 decodes no faster than bf16 (s51g: 11.8 ms both), its MoE on the pipelined tile
# (mma.sync e4m3, emulated on Hopper) past 8 rows an expert. The wgmma walks up to 16 / 32 mean rows an expert
# (DSERVE_MOE_WALK_ROWS_PER_EXPERT; passes of 16 rows past 16), alternating, two rounds, batch 128 / 256.
set -u
source "$(dirname "$0")/lib.sh"
AB_BATCHES=128,256 AB_KINDS="fp8 bf16" AB_BINS="base r16 r32" AB_CFG_r16=DSERVE_MOE_WALK_ROWS_PER_EXPERT=16 \
  AB_CFG_r32=DSERVE_MOE_WALK_ROWS_PER_EXPERT=32 AB_ROUNDS=2 bash "$(dirname "$0")/abbin.sh"
