#!/usr/bin/env bash
# Session 48, eighth call (binaries dserve, libds_cupti_trace.so with stream / channel / copy rows): which stream and
# hardware channel each node of the bf16 b1 graph runs on, with the shared expert forked before the routing (the
# default: the ~10 us start stall) and after it (DSERVE_SHARED_AFTER_ROUTE=1: no stall, session 46); launch latency
# timestamps on (DSERVE_TRACE_LATENCY=1).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
export DSERVE_TRACE_LATENCY=1
OUT=$OUT/trace_before TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
DSERVE_SHARED_AFTER_ROUTE=1 OUT=$OUT/trace_after TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
for v in before after; do
  echo "== fork $v the routing: $(grep -E '^Decode\.  median|cupti_trace' "$OUT/trace_$v/b1b_bs1.log" | tr '\n' ' ')"
  python3 scripts/device/replay_head.py "$OUT/trace_$v/trace_bs1.csv" --replays 2 --kernels 24 --streams
done
