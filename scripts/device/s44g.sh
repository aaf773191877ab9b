#!/usr/bin/env bash
# Run record (diagnostic only: cd5c190's kernels in the trace build of scripts/build_mla_trace.sh).
# Session 44, seventh call (~50 s; binary dserve_mla_trace of cd5c190's kernels): MLA decode at 1 x 32K, 16 heads, with
# split counts whose clusters fit the H200 at once (15 clusters of 8 = 120 splits, 7 of 16 = 112), the in-cluster
# merge leaving 15 / 7 partials for the combine instead of 128 (session 22 measured only clusters of 2 at this
# shape, on the H100: slower); against 128 splits (the plan) and 120 / 112 without clusters.
set -u
source "$(dirname "$0")/lib.sh"
run() {  # tag cluster args...
  local tag=$1 c=$2; shift 2
  MLA_TRACE_CLUSTER=$c timeout 60 "$B/dserve_mla_trace" "$@" > "$OUT/trace_$tag.log" 2>&1
  echo "== $tag rc=$? $(head -1 "$OUT/trace_$tag.log")"
  grep -E "PDL wait passed|tile 3 landed|epilogue|to the cluster|cluster merge|block total|^1[01] " "$OUT/trace_$tag.log"
}
for round in 1 2; do
  run "r${round}_128" -1 1 32768 16 128
  run "r${round}_120_c8" 8 1 32768 16 120
  run "r${round}_120" 0 1 32768 16 120
  run "r${round}_112_c16" 16 1 32768 16 112
  run "r${round}_112" 0 1 32768 16 112
  run "r${round}_64_c8" 8 1 32768 16 64
done
