#!/usr/bin/env bash
# Session 52: the wgmma FP8 GEMM only where one K range covers the weight (s52j: the V3-shaped model lost 1-2% at
# batch 48 / 64 with o_proj / dense / q_a split in 2-3 ranges). V3-shaped 3-layer FP8 at 48 / 64 and V2-Lite FP8 at
# 64, the default against DSERVE_FP8_WGMMA=0, two rounds; the FP8 GEMM cases.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run fp8gemm 150 'Fp8GemmGpu.*'
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base \
  AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=2 OUT=$OUT/v3 bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=1 \
  bash "$(dirname "$0")/abbin.sh"
