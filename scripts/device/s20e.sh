#!/usr/bin/env bash
# Session 20's fifth call (fixtures carried, models/ left behind): server_engine_test / server_api_test /
# stream_load_test on CUDA with the final binary (greedy sampling launch + counted combine in the server's graphs;
# server_acceptance_test and bench-accuracy ran in s20d with models/), then DSERVE_GRAPH_TIMING=1 at batch 1 / 8 / 64
# (device time of a replay, the gap between replays, the host time of the input copy + cudaGraphLaunch).
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1
for t in server_engine_test server_api_test stream_load_test; do
  start=$(date +%s)
  timeout 150 python3 tests/server/$t.py "$DSERVE_BINARY" > "$OUT/$t.log" 2>&1
  echo "== $t rc=$? ($(( $(date +%s) - start )) s)"; tail -4 "$OUT/$t.log"
done
printf '#!/bin/sh\nDSERVE_GRAPH_TIMING=1 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_timed"
chmod +x "$B/dserve_timed"
AB_BATCHES=1,8,64 AB_REPS=2 AB_BINS="dserve_timed" bash "$(dirname "$0")/abbin.sh"
grep -h "CUDA graph timing" "$OUT"/abbin_dserve_timed_r*.log
