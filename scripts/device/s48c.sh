#!/usr/bin/env bash
# Run record: DSERVE_GRAPH_EXP_ASC / _FRESH / _LATE existed only in session 48's binaries; _LATE is now the default order (DSERVE_GRAPH_INSTANTIATE_EACH=1: the old one).
# Session 48, third call (binary dserve): s48b found that b1 with graphs 1/2/4/8 is as fast as b1 alone when the
# graphs are captured smallest first (DSERVE_GRAPH_EXP_ASC=1), not with a fresh region per graph. Which half of the
# order matters: the captures (op state left by the larger warm-ups / captures) or the instantiation (b1's exec made
# last)? DSERVE_GRAPH_EXP_LATE=1 captures largest first and instantiates smallest first. And the flag join's slot
# ring (its position moves with the captures before b1): alone vs max-bs 8 with DSERVE_SIDE_FLAG_JOIN=0.
set -u
source "$(dirname "$0")/lib.sh"
for round in 1 2; do
  b1b_run "alone_$round" --batch-size 1 --output-len 32
  b1b_run "maxbs8_$round" --batch-size 1 --cuda-graph-max-bs 8 --output-len 32
  DSERVE_GRAPH_EXP_ASC=1 b1b_run "asc_$round" --batch-size 1 --cuda-graph-max-bs 8 --output-len 32
  DSERVE_GRAPH_EXP_LATE=1 b1b_run "late_$round" --batch-size 1 --cuda-graph-max-bs 8 --output-len 32
done
DSERVE_SIDE_FLAG_JOIN=0 b1b_run "fj0_alone" --batch-size 1 --output-len 32
DSERVE_SIDE_FLAG_JOIN=0 b1b_run "fj0_maxbs8" --batch-size 1 --cuda-graph-max-bs 8 --output-len 32
export DSERVE_GRAPH_TIMING=1
b1b_run timing_maxbs8 --batch-size 1 --cuda-graph-max-bs 8 --output-len 64
DSERVE_GRAPH_EXP_ASC=1 b1b_run timing_asc --batch-size 1 --cuda-graph-max-bs 8 --output-len 64
DSERVE_GRAPH_EXP_LATE=1 b1b_run timing_late --batch-size 1 --cuda-graph-max-bs 8 --output-len 64
for f in maxbs8 asc late; do echo "$f: $(grep -h 'CUDA graph timing, batch 1:' "$OUT/timing_$f.log" | sed 's/.*replays, //')"; done
