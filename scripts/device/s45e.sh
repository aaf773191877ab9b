#!/usr/bin/env bash
# Run record: the MoE norm's late trigger (DSERVE_MOE_NORM_LATE_TRIGGER) and DSERVE_FLAG_JOIN_EARLY were in this call's binary only, measured, and not landed (BENCHMARKS.md, Session 45).
# Session 45, fifth call (~200 s; binary dserve): (1) FP8 with the flag join but no early trigger from the norm
# (DSERVE_SIDE_FLAG_JOIN=1 DSERVE_FLAG_JOIN_EARLY=0) vs the event join, b1 / b8, two rounds; (2) bf16 b1 / b8 / b16,
# two rounds: the new default (flag join for bf16 at <= 8 tokens) vs the event join, each with and without the MoE
# norm's late trigger (DSERVE_MOE_NORM_LATE_TRIGGER=1: its dependents start once its loads have returned).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
AB_BATCHES=1,8 AB_KINDS="fp8" AB_ROUNDS=2 AB_BINS="ev fne" AB_CFG_ev=DSERVE_SIDE_FLAG_JOIN=0 \
  AB_CFG_fne=DSERVE_SIDE_FLAG_JOIN=1,DSERVE_FLAG_JOIN_EARLY=0 bash "$D/abbin.sh"
AB_BATCHES=1,8,16 AB_KINDS="bf16" AB_ROUNDS=2 AB_BINS="new ev late evlate" AB_CFG_ev=DSERVE_SIDE_FLAG_JOIN=0 \
  AB_CFG_late=DSERVE_MOE_NORM_LATE_TRIGGER=1 AB_CFG_evlate=DSERVE_SIDE_FLAG_JOIN=0,DSERVE_MOE_NORM_LATE_TRIGGER=1 \
  bash "$D/abbin.sh"
