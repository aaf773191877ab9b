#!/usr/bin/env bash
# Session 27's prepared second call: bench-one-batch V2-Lite bf16 and FP8, batch 1 and 8, the graph arena and the
# PDL join fence, alternating: base, DSERVE_GRAPH_ARENA=1, DSERVE_PDL_JOIN_FENCE=0, both (with s27a.sh's round, two
# rounds of the first two).
set -u
source "$(dirname "$0")/lib.sh"
for q in "" "--quantization fp8"; do
  AB_EXTRA="$q" AB_BATCHES=1,8 \
    AB_CONFIGS="base DSERVE_GRAPH_ARENA=1 DSERVE_PDL_JOIN_FENCE=0 DSERVE_GRAPH_ARENA=1,DSERVE_PDL_JOIN_FENCE=0" \
    OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
grep -h "captured CUDA graphs" "$OUT"/ab/*.log | cut -c1-300
