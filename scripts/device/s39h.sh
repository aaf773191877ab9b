#!/usr/bin/env bash
# Session 39, eighth call (~30 s): s39g's batch-8 trace, cut off there by a `head` on the pipe (SIGPIPE): one FP8
# layer's CUPTI timeline at b8 with the wgmma walk as the default.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
OUT=$OUT/trace_new TRACE_BS=8 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" > "$OUT/trace8.txt" 2>&1
sed -n '/^per decode step/,/total kernel time/p;/^timeline/,$p' "$OUT/trace8.txt"
