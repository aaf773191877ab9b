#!/usr/bin/env bash
# Session 20's second call: the whole GPU suite with the greedy-only sampling launch and the graphs' logits written in
# place (no copy node), then bench-one-batch batch 1 / 8 / 64 / 256 alternating main be4d57b (dserve_base), the new
# binary (dserve) and the new binary with DSERVE_SAMPLE_GREEDY_FAST=0 (the logits change alone); then the graph's
# device time against the gap around it (DSERVE_GRAPH_TIMING=1) for the new binary with and without the greedy launch.
set -u
source "$(dirname "$0")/lib.sh"
printf '#!/bin/sh\nDSERVE_SAMPLE_GREEDY_FAST=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_slow"
printf '#!/bin/sh\nDSERVE_GRAPH_TIMING=1 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_timed"
printf '#!/bin/sh\nDSERVE_GRAPH_TIMING=1 DSERVE_SAMPLE_GREEDY_FAST=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_slow_timed"
chmod +x "$B"/dserve_*
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 MEMCHECK_LIMIT=150 GTEST_FILTER='SampleGpu.*:CudaGraph*' \
  bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,8,64,256 AB_REPS=3 AB_BINS="dserve_base dserve dserve_slow" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64,256 AB_REPS=1 AB_BINS="dserve_timed dserve_slow_timed" bash "$(dirname "$0")/abbin.sh"
grep -H "CUDA graph timing" "$OUT"/abbin_*timed*.log
