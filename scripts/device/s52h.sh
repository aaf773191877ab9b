#!/usr/bin/env bash
# Session 52: the wgmma FP8 GEMM in the model. bench-one-batch V2-Lite FP8 at 24 / 32 / 48 / 64: "lt" = before (small-M
# up to the tuning table's M, then cuBLASLt); "wg" = wgmma from 17 tokens on (over the small-M kernel too) up to 64,
# one K range; "wg32" = the same up to 32 tokens (cuBLASLt past it). Alternating, two rounds.
set -u
source "$(dirname "$0")/lib.sh"
AB_BATCHES=24,32,48,64 AB_KINDS="fp8" AB_BINS="lt wg wg32" AB_CFG_lt=DSERVE_FP8_WGMMA=0 \
  AB_CFG_wg=DSERVE_FP8_WGMMA_CTAS=1,DSERVE_FP8_WGMMA_MIN_M=17 \
  AB_CFG_wg32=DSERVE_FP8_WGMMA_CTAS=1,DSERVE_FP8_WGMMA_MIN_M=17,DSERVE_FP8_WGMMA_MAX_M=32 AB_ROUNDS=2 \
  bash "$(dirname "$0")/abbin.sh"
