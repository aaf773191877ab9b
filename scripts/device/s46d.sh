#!/usr/bin/env bash
# Session 46, fourth call (~120 s; binaries of s46b): the bf16 graph's second kernel starts ~10 us late only with the
# side stream and PDL both on, and FP8 (whose shared expert forks after the routing) does not show it: bf16 b1 traces
# with the shared expert forked after the routing (DSERVE_SHARED_AFTER_ROUTE=1), without the small-M pre-wait staging
# (DSERVE_SMALL_M_PREWAIT=0), without early triggers (DSERVE_PDL_EARLY=0); bench-one-batch bf16 b1 / b8 two rounds
# against DSERVE_SHARED_AFTER_ROUTE=1.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for cfg in DSERVE_SHARED_AFTER_ROUTE=1 DSERVE_SMALL_M_PREWAIT=0 DSERVE_PDL_EARLY=0; do
  env $cfg OUT=$OUT/trace_${cfg%%=*} TRACE_BS=1 TRACE_EXTRA="" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | grep "^=="
done
for d in "$OUT"/trace_*; do
  echo "== $(basename "$d"): first kernels of the last graph replay (start, end us)"
  python3 scripts/device/replay_head.py "$d/trace_bs1.csv"
done
AB_BATCHES=1,8 AB_KINDS="bf16" AB_ROUNDS=2 AB_BINS="new aft" AB_CFG_aft=DSERVE_SHARED_AFTER_ROUTE=1 bash "$D/abbin.sh"
