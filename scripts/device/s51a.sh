#!/usr/bin/env bash
# Prepared in session 50 for the next session's first call (binaries dserve, dserve_mla_bench, libds_cupti_trace.so):
# issue 6's / 7's table on session 50's final tree (s50e's predates the o_proj change), then a bf16 batch-1 trace
# of that tree (layer timeline and per-kernel times) to pick the next link.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
OUT=$OUT/tables bash "$D/s50b.sh"
OUT=$OUT/trace TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py final "$OUT/trace/trace_bs1.csv" --replays 1 2>/dev/null | head -20
sed -n 5,25p "$OUT/trace/summary_bs1.txt"
# The FP8 batch-1 step too (issue 7's line): its layer timeline.
OUT=$OUT/trace_fp8 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py fp8 "$OUT/trace_fp8/trace_bs1.csv" --replays 1 2>/dev/null | head -20
sed -n 5,25p "$OUT/trace_fp8/summary_bs1.txt"
