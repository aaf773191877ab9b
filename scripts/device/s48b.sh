#!/usr/bin/env bash
# Run record: DSERVE_GRAPH_EXP_ASC / _FRESH / _LATE existed only in session 48's binaries; _LATE is now the default order (DSERVE_GRAPH_INSTANTIATE_EACH=1: the old one).
# Session 48, second call (binaries dserve, libds_cupti_trace.so): s48a found that capturing graphs 2/4/8 beside 1
# costs batch 1 ~1% of device time (not the cache's size). bf16 b1, input 256, output 32, two rounds alternating:
# `1` alone; `1 --cuda-graph-max-bs 8`; the same with the graphs captured smallest first (DSERVE_GRAPH_EXP_ASC=1) and
# with a fresh graph region per graph (DSERVE_GRAPH_EXP_FRESH=1). Then traces of b1 alone and with max-bs 8.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for round in 1 2; do
  b1b_run "alone_$round" --output-len 32 --batch-size 1
  b1b_run "maxbs8_$round" --output-len 32 --batch-size 1 --cuda-graph-max-bs 8
  DSERVE_GRAPH_EXP_ASC=1 b1b_run "asc_$round" --output-len 32 --batch-size 1 --cuda-graph-max-bs 8
  DSERVE_GRAPH_EXP_FRESH=1 b1b_run "fresh_$round" --output-len 32 --batch-size 1 --cuda-graph-max-bs 8
done
OUT=$OUT/trace_alone TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
OUT=$OUT/trace_maxbs8 TRACE_BS=1 TRACE_EXTRA="--cuda-graph-max-bs 8" bash "$D/trace.sh" > /dev/null
for d in "$OUT"/trace_*; do
  echo "== $(basename "$d")"; grep -E "^Decode\.  median" "$d/b1b_bs1.log"; head -40 "$d/summary_bs1.txt"
done
