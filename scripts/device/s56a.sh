#!/usr/bin/env bash
# Session 56's first call (binaries dserve, ds_ops_cuda_gpu_test; ~500 s). (1) The pair default's confirming run
# (session 55 made V2-Lite's q / kv_a pair in one wgmma launch the default from one alternating A/B): the fixture,
# MoE FP8, graph and pair cases on the default, the new cover mode's case (also under memcheck), then V2-Lite FP8
# batch 32 / 48 / 64 two launches (DSERVE_FP8_WGMMA_PAIR=0) vs the pair, two rounds alternating. (2) The cover mode
# (clusters only for weights whose K needs more than one range, 17-32 tokens) in the V3-shaped 3-layer model FP8 at
# batch 24 / 32 / 64: default vs DSERVE_FP8_WGMMA_COVER=8 vs that up to 64 tokens, two rounds alternating.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run fix 150 '*Fixture*:*MoeFp8*:CudaGraph*:Fp8GemmGpu.LinearPair*:Fp8GemmGpu.WgmmaCover*:Fp8GemmGpu.Wgmma*'
grep -E "^\[  FAILED" "$OUT/fix.log" | head
memcheck_run cover_mc 100 'Fp8GemmGpu.WgmmaCoverModeTakesOnlyKSplitWeights'
AB_BATCHES=32,48,64 AB_KINDS="fp8" AB_BINS="two pair" AB_CFG_two=DSERVE_FP8_WGMMA_PAIR=0 AB_CFG_pair=base \
  AB_ROUNDS=2 OUT=$OUT/pair bash "$D/abbin.sh"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=24,32,64 AB_KINDS="fp8" AB_BINS="base cov cov64" AB_CFG_base=base \
  AB_CFG_cov=DSERVE_FP8_WGMMA_COVER=8 AB_CFG_cov64=DSERVE_FP8_WGMMA_COVER=8,DSERVE_FP8_WGMMA_COVER_MAX_M=64 \
  AB_ROUNDS=2 OUT=$OUT/cover bash "$D/abbin.sh"
