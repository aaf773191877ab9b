#!/usr/bin/env bash
# Run record (diagnostic only: HEAD e69928e's kernels, the trace build of scripts/build_mla_trace.sh).
# Session 44, sixth call (~60 s; binaries dserve_mla_trace (scripts/build_mla_trace.sh), dserve_mla_bench): where the
# bf16 batch-1 layer's MLA decode link (5.8 us after the prep in the model's trace) goes at bench-one-batch's context
# (~288): per-block timelines of the t16 kernel at 1 x 288 x 16 heads with the plan's splits and with 1 / 2 / 3, and
# dserve_mla_bench at that shape with those split counts; 1 x 32K for issue 6's MLA line.
set -u
source "$(dirname "$0")/lib.sh"
for args in "1 288 16" "1 288 16 1" "1 288 16 2" "1 320 16" "1 32768 16"; do
  timeout 60 "$B/dserve_mla_trace" $args > "$OUT/trace_${args// /_}.log" 2>&1
  echo "== trace [$args] rc=$?"; cat "$OUT/trace_${args// /_}.log"
done
MLA_BENCH_SHAPES=1x288x16,1x32768x16 MLA_BENCH_ALT=1,2,3,5 timeout 100 "$B/dserve_mla_bench" "$OUT/mla.csv" > "$OUT/mla.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode|alt splits|splits" "$OUT/mla.log" | head -30
