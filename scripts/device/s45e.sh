#!/usr/bin/env bash
# Session 45, fifth call (~200 s; binary dserve): (1) FP8 with the flag join but no early trigger from the norm
# (DSERVE_SIDE_FLAG_JOIN=1 DSERVE_FLAG_JOIN_EARLY=0) vs the event join, b1 / b8, two rounds; (2) the new default
# (flag join for bf16 at <= 8 tokens) vs the event join, bf16 b1 / b8 / b16, two rounds.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
AB_BATCHES=1,8 AB_KINDS="fp8" AB_ROUNDS=2 AB_BINS="ev fne" AB_CFG_ev=DSERVE_SIDE_FLAG_JOIN=0 \
  AB_CFG_fne=DSERVE_SIDE_FLAG_JOIN=1,DSERVE_FLAG_JOIN_EARLY=0 bash "$D/abbin.sh"
AB_BATCHES=1,8,16 AB_KINDS="bf16" AB_ROUNDS=2 AB_BINS="new ev" AB_CFG_ev=DSERVE_SIDE_FLAG_JOIN=0 bash "$D/abbin.sh"
