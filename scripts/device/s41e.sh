#!/usr/bin/env bash
# Session 41, fifth call (~330 s; binaries from main with s41c's join switch and s41d's cluster norms removed, and the
# new opt-in DSERVE_MOE_WGMMA_DOWN_STAGES): (1) the GPU suite on the session's final defaults (the walks past 16 tokens
# up to 256); (2) the MoE layer timings (V3 at 256 tokens now on the walk: BENCHMARKS' V3 layer table); (3) A/B two
# rounds FP8 / bf16 b1 / b8: default, the down walks at 8 / 4 stages (s40a: FP8 at 8 stages for both walks won batch 1
# 1.61 vs 1.63 and lost batch 8 3.60 vs 3.50; which product gains?).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
gtest_run moelayer 150 'MoeFp8Test.V2LiteDecodeBandwidth:MoeFp8Test.V3LayerDecodeTiming'
grep -E "MOEFP8BW|MOEFP8V3|Failure" "$OUT/moelayer.log" | head -20
AB_BATCHES=1,8 AB_KINDS="fp8 bf16" AB_ROUNDS=2 AB_BINS="new d8 d4" AB_CFG_d8=DSERVE_MOE_WGMMA_DOWN_STAGES=8 \
  AB_CFG_d4=DSERVE_MOE_WGMMA_DOWN_STAGES=4 bash "$D/abbin.sh"
