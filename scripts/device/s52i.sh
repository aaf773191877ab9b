#!/usr/bin/env bash
# Session 52, the candidate tree (the wgmma FP8 GEMM past the small-M kernel's tuned M up to 64 tokens, fewest
# splits, by default): the whole GPU suite, memcheck on the new cases, then bench-one-batch V2-Lite FP8 at 1 / 8 / 32
# / 48 / 64 and the V3-shaped 3-layer FP8 model at 32 / 64, the default against DSERVE_FP8_WGMMA=0, alternating.
set -u
source "$(dirname "$0")/lib.sh"
SUITE_LIMIT=170 bash "$(dirname "$0")/gpusuite.sh"
memcheck_run memcheck 150 'Fp8GemmGpu.WgmmaSplitK*:Fp8GemmGpu.LinearPair*:Fp8GemmGpu.AutoDispatch*'
AB_BATCHES=1,8,32,48,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=2 \
  bash "$(dirname "$0")/abbin.sh"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base \
  AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=1 OUT=$OUT/v3 bash "$(dirname "$0")/abbin.sh"
