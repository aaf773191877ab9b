#!/usr/bin/env bash
# Run record: DSERVE_GRAPH_EDGE_EXP existed only in that call's binaries (removed: it changed nothing, BENCHMARKS.md session 47).
# Session 47, first call, second part: bench-one-batch bf16 / FP8 b1 / b8, two rounds alternating, default against
# DSERVE_GRAPH_EDGE_EXP=1 (every fork edge full) and =2 (the first fork's).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new e1 e2" AB_CFG_e1=DSERVE_GRAPH_EDGE_EXP=1 \
  AB_CFG_e2=DSERVE_GRAPH_EDGE_EXP=2 bash "$D/abbin.sh"
