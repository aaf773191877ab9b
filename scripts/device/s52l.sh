#!/usr/bin/env bash
# Session 52, last call: the wgmma FP8 GEMM only on weights of at most 12 MiB (s52k: V3-shaped batch 48 still +0.8%
# with its single-range q_b / shared down). V3-shaped 3-layer FP8 at 48 / 64 and V2-Lite FP8 at 48 / 64, the default
# against DSERVE_FP8_WGMMA=0; the FP8 GEMM cases.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run fp8gemm 150 'Fp8GemmGpu.*'
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base \
  AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=1 OUT=$OUT/v3 bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=1 \
  bash "$(dirname "$0")/abbin.sh"
