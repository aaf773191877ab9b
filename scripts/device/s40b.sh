#!/usr/bin/env bash
# Session 40, second call (~380 s): (1) the bf16 walk's launch fix (the shared-memory attribute at the largest size
# asked: s40a's Bf16WgmmaWalkThroughTheOps failed with "invalid argument" on a V2-Lite launch after a small-K one),
# the decode-kernel cases on all three backends, then the whole GPU suite under the new defaults (the bf16 walk from
# one token; ring depth by dtype and token columns: bf16 8 stages, FP8 6, 4 at 16 columns where more CTAs fit);
# (2) A/B: new vs old (the bf16 walk off; FP8 at 6 stages everywhere), V2-Lite bf16 b1 / 4 / 8 / 16 and FP8 b1 / 8
# / 12 / 16 two rounds, V3-shaped FP8 five layers b1 / 8 / 16 one round.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run walk 200 'MoeGroupedTest.Bf16WgmmaWalk*:DecodeKernel/MoeGroupedDecodeKernels.*:MoeGemmGpu.Bf16WgmmaWalk*'
grep -E "Failure|FAILED" "$OUT/walk.log" | head -20
SUITE_LIMIT=170 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_BATCHES=1,4,8,16 AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new old" AB_CFG_old=DSERVE_MOE_BF16_WGMMA=0 bash "$D/abbin.sh"
AB_BATCHES=1,8,12,16 AB_KINDS=fp8 AB_ROUNDS=2 AB_BINS="new old" AB_CFG_old=DSERVE_MOE_WGMMA_STAGES=6 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_BATCHES=1,8,16 AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BINS="new old" \
  AB_CFG_old=DSERVE_MOE_WGMMA_STAGES=6 bash "$D/abbin.sh"
# (3) opt-in variants on the new defaults, one round: the walks' weight boxes evict-first in the L2
# (DSERVE_MOE_WGMMA_EVICT_FIRST=1: the mma.sync FP8 streams' hint since session 37, which the walk dropped) at bf16
# and FP8 b1 / b8; session 38's L2 prefetch of the shared expert's weights during the attention chain (reverted
# 7c89318, re-applied: DSERVE_L2_PREFETCH_MB=24 / 40) now that the bf16 MoE phase runs at ~3.8 TB/s.
AB_BATCHES=1,8 AB_KINDS=bf16 AB_ROUNDS=1 AB_BINS="new ef pf24 pf40" AB_CFG_ef=DSERVE_MOE_WGMMA_EVICT_FIRST=1 \
  AB_CFG_pf24=DSERVE_L2_PREFETCH_MB=24 AB_CFG_pf40=DSERVE_L2_PREFETCH_MB=40 bash "$D/abbin.sh"
AB_BATCHES=1,8 AB_KINDS=fp8 AB_ROUNDS=1 AB_BINS="new ef" AB_CFG_ef=DSERVE_MOE_WGMMA_EVICT_FIRST=1 bash "$D/abbin.sh"
