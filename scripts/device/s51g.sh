#!/usr/bin/env bash
# Session 51: the pipelined MoE tile past 8 rows an expert (V2-Lite batch 128 / 256: ~12-24 rows an expert), its
# shapes never re-measured on the H200 (defaults from the H100, 2026-11-26): bf16 DSERVE_MOE_TILE and FP8
# DSERVE_MOE_FP8_TILE 1 (16 tokens x 64 rows), 2 (16 x 128), bf16 5 / FP8 3 (the other 32-token shape), against the
# defaults (bf16 3 = 32 x 128; FP8 gate|up 5, down 3 at 256 tokens), alternating, two rounds.
set -u
source "$(dirname "$0")/lib.sh"
AB_BATCHES=128,256 AB_KINDS="bf16 fp8" AB_BINS="base t1 t2 t53" AB_CFG_t1=DSERVE_MOE_TILE=1,DSERVE_MOE_FP8_TILE=1 \
  AB_CFG_t2=DSERVE_MOE_TILE=2,DSERVE_MOE_FP8_TILE=2 AB_CFG_t53=DSERVE_MOE_TILE=5,DSERVE_MOE_FP8_TILE=3 AB_ROUNDS=2 \
  bash "$(dirname "$0")/abbin.sh"
