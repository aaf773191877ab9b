#!/usr/bin/env bash
# Session 39, fourth call (~200 s): the wgmma walk's ring depth (DSERVE_MOE_FP8_WGMMA_STAGES 4 / 6 / 8: more bytes
# in flight per CTA, fewer CTAs an SM) in the forward, where s39b/c's timelines show both walks well under the
# bandwidth (down 17-23 MB in ~10 us). (1) the wgmma tests at 6 and 8 stages; (2) A/B FP8 b1 / b8 two rounds: new,
# wg, wg6, wg8, wgfu (+ shared-experts fusion), wgfu6.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for st in 6 8; do
  DSERVE_MOE_FP8_WGMMA_STAGES=$st gtest_run wgmma$st 120 'MoeFp8Test.WgmmaWalk*'
  grep -E "MOEFP8WGMMA|Failure" "$OUT/wgmma$st.log" | head -12
done
AB_KINDS=fp8 AB_ROUNDS=2 AB_BINS="new wg wg6 wg8 wgfu wgfu6" AB_CFG_wg=DSERVE_MOE_FP8_WGMMA=1 \
  AB_CFG_wg6=DSERVE_MOE_FP8_WGMMA=1,DSERVE_MOE_FP8_WGMMA_STAGES=6 \
  AB_CFG_wg8=DSERVE_MOE_FP8_WGMMA=1,DSERVE_MOE_FP8_WGMMA_STAGES=8 \
  AB_CFG_wgfu=DSERVE_MOE_FP8_WGMMA=1,DSERVE_SHARED_EXPERTS_FUSION=1 \
  AB_CFG_wgfu6=DSERVE_MOE_FP8_WGMMA=1,DSERVE_SHARED_EXPERTS_FUSION=1,DSERVE_MOE_FP8_WGMMA_STAGES=6 bash "$D/abbin.sh"
