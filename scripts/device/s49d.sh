#!/usr/bin/env bash
# Session 49, fourth call (binary dserve): untraced, DSERVE_GRAPH_TIMING=1 (device time input copy -> graph end,
# median of 66 replays), bf16 b1 output 64, two rounds alternating: plain; an experiment spin of 15 us queued before
# each graph launch (DSERVE_EXP_PRE_SPIN_NS; is the graph's ~12 us second-node setup hidden behind earlier stream
# work? then the device time grows by ~5 us, else by ~15); a 10 us spin as the graph's first node
# (DSERVE_EXP_HEAD_SPIN_NS; s49b's traces say it is absorbed).
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_GRAPH_TIMING=1
for round in 1 2; do
  b1b_run "plain_$round" --batch-size 1 --output-len 64
  DSERVE_EXP_PRE_SPIN_NS=15000 b1b_run "pre15_$round" --batch-size 1 --output-len 64
  DSERVE_EXP_HEAD_SPIN_NS=10000 b1b_run "head10_$round" --batch-size 1 --output-len 64
done
for f in "$OUT"/*.log; do echo "$(basename "$f"): $(grep -h "CUDA graph timing, batch 1:" "$f")"; done
