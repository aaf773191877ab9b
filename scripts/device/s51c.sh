#!/usr/bin/env bash
# Session 51: the larger batches' switches, env only (same binary), alternating: shared-experts fusion
# (DSERVE_SHARED_EXPERTS_FUSION=1: the shared MLP as routed experts of the walk, instead of cuBLASLt beside it at
# M = 64) and every V2-Lite FP8 dense GEMM on the small-M kernel up to 64 rows (DSERVE_FP8_SMALL_M_MAX=64: q_proj with
# kv_a in one pair launch, o_proj, the shared MLP), at batch 32 / 64 / 256.
set -u
source "$(dirname "$0")/lib.sh"
AB_BATCHES=32,64,256 AB_KINDS="fp8 bf16" AB_BINS="base fus sm64" AB_CFG_fus=DSERVE_SHARED_EXPERTS_FUSION=1 \
  AB_CFG_sm64=DSERVE_FP8_SMALL_M_MAX=64 AB_ROUNDS=2 bash "$(dirname "$0")/abbin.sh"
