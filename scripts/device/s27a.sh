#!/usr/bin/env bash
# Session 27's prepared call (that session had no device time; run it first next time). The whole GPU suite with
# the new cases: the PDL chain probe (PDLCHAIN lines, session 26), the join probe Pdl.JoinedStreamWaitsForBoth
# (PDLJOIN), the graph arena in CudaGraphTest / CudaGraphArena (GRAPHSTATS / GRAPHARENA: memory nodes and
# programmatic edges of the captured graphs). Then bench-one-batch V2-Lite bf16 and FP8, batch 1 and 8, two
# alternating rounds: base, DSERVE_GRAPH_ARENA=1 (no alloc / free nodes between captured kernels, so their PDL edges
# stay programmatic), DSERVE_PDL_JOIN_FENCE=0, both. The "captured CUDA graphs" line of each run gives the node and
# edge counts. If the arena holds (suite green, faster), flip graph_arena_enabled()'s default (cuda_runtime.cpp).
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite timeout 250 bash "$(dirname "$0")/gpusuite.sh"
grep -h "PDLCHAIN\|PDLJOIN\|GRAPHSTATS\|GRAPHARENA" "$OUT"/suite/*.log
for rep in 1 2; do
  for q in "" "--quantization fp8"; do
    AB_EXTRA="$q" AB_BATCHES=1,8 \
      AB_CONFIGS="base DSERVE_GRAPH_ARENA=1 DSERVE_PDL_JOIN_FENCE=0 DSERVE_GRAPH_ARENA=1,DSERVE_PDL_JOIN_FENCE=0" \
      OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
  done
done
grep -h "captured CUDA graphs" "$OUT"/ab1/*.log | cut -c1-300
