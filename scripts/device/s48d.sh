#!/usr/bin/env bash
# Run record: DSERVE_GRAPH_EXP_ASC / _FRESH / _LATE existed only in session 48's binaries; _LATE is now the default order (DSERVE_GRAPH_INSTANTIATE_EACH=1: the old one).
# Session 48, fourth call (binaries dserve, libds_cupti_trace.so): s48c found that it is the instantiation order
# (DSERVE_GRAPH_EXP_LATE=1: capture largest first, instantiate smallest first: b1 as fast as alone). Is it the
# hardware queues a graph's streams land on? bf16 b1 alone / max-bs 8 under CUDA_DEVICE_MAX_CONNECTIONS=32 and =1,
# two rounds; the 1,8 list with LATE; then b1 traces with 32 connections (the graph's start stall of session 46).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for round in 1 2; do
  b1b_run "alone_$round" --output-len 32 --batch-size 1
  b1b_run "maxbs8_$round" --output-len 32 --batch-size 1 --cuda-graph-max-bs 8
  CUDA_DEVICE_MAX_CONNECTIONS=32 b1b_run "c32_alone_$round" --output-len 32 --batch-size 1
  CUDA_DEVICE_MAX_CONNECTIONS=32 b1b_run "c32_maxbs8_$round" --output-len 32 --batch-size 1 --cuda-graph-max-bs 8
  CUDA_DEVICE_MAX_CONNECTIONS=1 b1b_run "c1_maxbs8_$round" --output-len 32 --batch-size 1 --cuda-graph-max-bs 8
  b1b_run "list18_$round" --output-len 32 --batch-size 1,8
  DSERVE_GRAPH_EXP_LATE=1 b1b_run "late_list18_$round" --output-len 32 --batch-size 1,8
done
CUDA_DEVICE_MAX_CONNECTIONS=32 OUT=$OUT/trace_c32 TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
for d in "$OUT"/trace_*; do
  echo "== $(basename "$d"): first kernels of the last graph replay (start, end us)"
  python3 scripts/device/replay_head.py "$d/trace_bs1.csv" --replays 2
done
