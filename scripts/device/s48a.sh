#!/usr/bin/env bash
# Session 48, first call (binary dserve): which part of `--batch-size 1,8` costs batch 1 ~1.5% (lesson 35). bf16 b1,
# input 256, output 32, two rounds alternating: `1` alone; `1 --cuda-graph-max-bs 8` (graphs 1/2/4/8 captured, now
# really: session 47's probe of it captured only 1); `1 --max-total-tokens 2624` (the cache of a 1,8 run: 41 pages +
# the dummy); `1,8`; `8,1`. Then each form once more at output 64 with DSERVE_GRAPH_TIMING=1 (device time vs gap).
set -u
source "$(dirname "$0")/lib.sh"
for round in 1 2; do
  b1b_run "alone_$round" --batch-size 1 --output-len 32
  b1b_run "maxbs8_$round" --batch-size 1 --cuda-graph-max-bs 8 --output-len 32
  b1b_run "cache41_$round" --batch-size 1 --max-total-tokens 2624 --output-len 32
  b1b_run "list18_$round" --batch-size 1,8 --output-len 32
  b1b_run "list81_$round" --batch-size 8,1 --output-len 32
done
export DSERVE_GRAPH_TIMING=1
b1b_run timing_alone --batch-size 1 --output-len 64
b1b_run timing_maxbs8 --batch-size 1 --cuda-graph-max-bs 8 --output-len 64
b1b_run timing_cache41 --batch-size 1 --max-total-tokens 2624 --output-len 64
b1b_run timing_list18 --batch-size 1,8 --output-len 64
grep -h "CUDA graph timing, batch 1:" "$OUT"/timing_*.log
