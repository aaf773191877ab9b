#!/usr/bin/env bash
# Session 39, third call (~220 s): s39b's timeline showed the wgmma walk's gate|up at 16.9 us in the forward (7.0
# alone) beside the shared expert's gate|up on the side stream (started 3 us after it: the walk's CTAs leave room),
# and the down walk 12.1 us (5.0 alone) beside the shared down: the MoE phase is bandwidth shared between two chains.
# A/B FP8 b1 / b8 two rounds: new, wg, wg + shared-experts fusion (the shared experts as two more slots of the same
# walks: one kernel streams both), wg + the shared fork before the routing; then wgfu's layer timeline at b1.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
AB_KINDS=fp8 AB_ROUNDS=2 AB_BINS="new wg wgfu wgbr" AB_CFG_wg=DSERVE_MOE_FP8_WGMMA=1 \
  AB_CFG_wgfu=DSERVE_MOE_FP8_WGMMA=1,DSERVE_SHARED_EXPERTS_FUSION=1 \
  AB_CFG_wgbr=DSERVE_MOE_FP8_WGMMA=1,DSERVE_SHARED_AFTER_ROUTE=0 bash "$D/abbin.sh"
DSERVE_MOE_FP8_WGMMA=1 DSERVE_SHARED_EXPERTS_FUSION=1 OUT=$OUT/trace_wgfu TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
