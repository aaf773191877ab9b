#!/usr/bin/env bash
# Session 27's prepared first call (that session had no device time). Binaries: dserve, ds_ops_cuda_gpu_test,
# libds_cupti_trace.so. The whole GPU suite with the new cases: the PDL chain probe (PDLCHAIN lines, session 26),
# the join probe Pdl.JoinedStreamWaitsForBoth (PDLJOIN), the graph arena in CudaGraphTest / CudaGraphArena
# (GRAPHSTATS / GRAPHARENA: memory nodes and programmatic edges of the captured graphs); the batch-1 FP8 CUPTI trace
# with DSERVE_GRAPH_ARENA=1 (its last table: starts by node-id distance, all should now be distance 1 and early);
# bench-one-batch V2-Lite bf16 and FP8, batch 1 and 8, base vs DSERVE_GRAPH_ARENA=1. s27b.sh repeats the A/B and
# adds DSERVE_PDL_JOIN_FENCE=0. If the arena holds (suite green, faster), flip graph_arena_enabled()'s default.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite timeout 250 bash "$(dirname "$0")/gpusuite.sh"
grep -h "PDLCHAIN\|PDLJOIN\|GRAPHSTATS\|GRAPHARENA" "$OUT"/suite/*.log
# Every graph test with the arena forced on (the serving engine's graphs too): the races it could expose show here.
DSERVE_GRAPH_ARENA=1 GTEST_FILTER='*Graph*' SUITE_LIMIT=120 OUT=$OUT/arena_graphs timeout 130 \
  bash "$(dirname "$0")/gpusuite.sh"
DSERVE_GRAPH_ARENA=1 OUT=$OUT/trace_arena TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  bash "$(dirname "$0")/trace.sh" | grep -E "^==|^Decode|^step|distance|^  [123]:"
for q in "" "--quantization fp8"; do
  AB_EXTRA="$q" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_GRAPH_ARENA=1" \
    OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
grep -h "captured CUDA graphs" "$OUT"/ab/*.log | cut -c1-300
