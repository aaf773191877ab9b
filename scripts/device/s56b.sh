#!/usr/bin/env bash
# Session 56's second call (binaries dserve, ds_ops_cuda_gpu_test; ~500 s): s54d and the rest of s54a. (1) The MLA
# and fixture cases with the decode's split count forced to 3 (DSERVE_MLA_SPLITS), then V2-Lite FP8 batch 32 / 64 /
# 128: the plan's count vs 1 / 3 / 4 splits, one round. (2) The V3-shaped 3-layer model FP8 at batch 8 / 32 / 64 /
# 128: static walk tiles (DSERVE_MOE_WALK_DYNAMIC=0) vs the dynamic default, one round. (3) The dynamic tiles' lower
# bound: V2-Lite FP8 batch 2 / 4 / 16 static vs dynamic everywhere. (4) The side stream with dynamic tiles: batch
# 32 / 64 default vs one stream (DSERVE_SIDE_STREAM=0) vs the fork before the routing (DSERVE_SHARED_AFTER_ROUTE=0).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_MLA_SPLITS=3 gtest_run sp3 200 '*Mla*:*Fixture*'
grep -E "^\[  FAILED" "$OUT/sp3.log" | head
AB_BATCHES=32,64,128 AB_KINDS="fp8" AB_BINS="plan s1 s3 s4" AB_CFG_plan=base AB_CFG_s1=DSERVE_MLA_SPLITS=1 \
  AB_CFG_s3=DSERVE_MLA_SPLITS=3 AB_CFG_s4=DSERVE_MLA_SPLITS=4 AB_ROUNDS=1 OUT=$OUT/splits bash "$D/abbin.sh"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=8,32,64,128 AB_KINDS="fp8" AB_BINS="st dy" AB_CFG_st=DSERVE_MOE_WALK_DYNAMIC=0 \
  AB_CFG_dy=base AB_ROUNDS=1 OUT=$OUT/v3 bash "$D/abbin.sh"
AB_BATCHES=2,4,16 AB_KINDS="fp8" AB_BINS="st dy" AB_CFG_st=DSERVE_MOE_WALK_DYNAMIC=0 AB_CFG_dy=DSERVE_MOE_WALK_DYNAMIC=1 \
  AB_ROUNDS=1 OUT=$OUT/bound bash "$D/abbin.sh"
AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="base one early" AB_CFG_base=base AB_CFG_one=DSERVE_SIDE_STREAM=0 \
  AB_CFG_early=DSERVE_SHARED_AFTER_ROUTE=0 AB_ROUNDS=1 OUT=$OUT/side bash "$D/abbin.sh"
# (5) The pair at batch 64 again (s56a: 6.02 / 5.78 ms vs two launches' 5.91 / 5.90, mixed; 48 won 5.55 vs 5.91):
# three more rounds alternating at 56 / 64.
AB_BATCHES=56,64 AB_KINDS="fp8" AB_BINS="two pair" AB_CFG_two=DSERVE_FP8_WGMMA_PAIR=0 AB_CFG_pair=base \
  AB_ROUNDS=3 OUT=$OUT/pair64 bash "$D/abbin.sh"
