#!/usr/bin/env bash
# Run record: DSERVE_SIDE_FORK_FENCE was in this call's binaries only (measured, not kept; BENCHMARKS.md, Session 46).
# Session 46, fifth call (~180 s; binaries dserve, libds_cupti_trace.so): the bf16 graph's second kernel waits ~10 us
# when the shared expert forks before the routing (s46d); the fork's first side kernel as a plain launch
# (DSERVE_SIDE_FORK_FENCE=1: the first fork of a forward, =2: every fork): bf16 b1 traces, then bench-one-batch bf16 /
# FP8 b1 / b8 two rounds against both.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for v in 1 2; do
  DSERVE_SIDE_FORK_FENCE=$v OUT=$OUT/trace_ff$v TRACE_BS=1 TRACE_EXTRA="" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | grep "^=="
done
for d in "$OUT"/trace_*; do
  echo "== $(basename "$d"): first kernels of the last graph replay (start, end us)"
  python3 scripts/device/replay_head.py "$d/trace_bs1.csv"
done
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new ff1 ff2" AB_CFG_ff1=DSERVE_SIDE_FORK_FENCE=1 \
  AB_CFG_ff2=DSERVE_SIDE_FORK_FENCE=2 bash "$D/abbin.sh"
