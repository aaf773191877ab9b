#!/usr/bin/env bash
# Session 46, third call (~90 s; binaries of s46b): which part of the bf16 decode graph delays its second kernel by
# ~10 us after the first (FP8: ~1.4 us): bf16 b1 traces with the event join instead of the flag join
# (DSERVE_SIDE_FLAG_JOIN=0), without the side stream, without stream priorities, without PDL; FP8 with the flag join.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for cfg in DSERVE_SIDE_FLAG_JOIN=0 DSERVE_SIDE_STREAM=0 DSERVE_STREAM_PRIORITY=0 DSERVE_PDL=0; do
  env $cfg OUT=$OUT/trace_${cfg%%=*} TRACE_BS=1 TRACE_EXTRA="" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | grep "^=="
done
DSERVE_SIDE_FLAG_JOIN=1 OUT=$OUT/trace_fp8fj TRACE_BS=1 TRACE_EXTRA="--quantization fp8" TRACE_SUMMARY_ARGS="" \
  bash "$D/trace.sh" | grep "^=="
for d in "$OUT"/trace_*; do
  echo "== $(basename "$d"): first kernels of the last graph replay (start, end us)"
  python3 scripts/device/replay_head.py "$d/trace_bs1.csv"
done
