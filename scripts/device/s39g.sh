#!/usr/bin/env bash
# Session 39, seventh call (~190 s): where an FP8 decode layer's time goes with the wgmma walk as the default, for the
# next session: one layer's CUPTI timeline at b1 and b8 (trace.sh), and shared-experts fusion on top of it at b1 / b8 /
# b16 (one round; s39d measured it at b1 / b8 with 8-column tiles only).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
OUT=$OUT/trace_new TRACE_BS="1 8" TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" > "$OUT/trace.txt" 2>&1; sed -n "/^per decode step/,/total kernel time/p;/^timeline/,\$p" "$OUT/trace.txt"
AB_BATCHES=1,8,16 AB_KINDS=fp8 AB_ROUNDS=1 AB_BINS="new fu" AB_CFG_fu=DSERVE_SHARED_EXPERTS_FUSION=1 bash "$D/abbin.sh"
