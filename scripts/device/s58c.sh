#!/usr/bin/env bash
# Session 57's prepared traces (s57a.sh without the suite): the V2-Lite FP8 batch-64 CUPTI trace, the V3-shaped
# 3-layer FP8 model at batch 32 with and without DSERVE_FP8_WGMMA_COVER=8.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
OUT=$OUT/lite64 TRACE_BS=64 TRACE_EXTRA="--quantization fp8" bash "$D/trace.sh" | head -60
v3_config "$OUT/v3l3.json" 3
for cfg in base cover; do
  extra=(); [ "$cfg" = cover ] && extra=(env DSERVE_FP8_WGMMA_COVER=8)
  "${extra[@]}" env OUT="$OUT/v3_$cfg" TRACE_BS=32 TRACE_MODEL="$OUT/v3l3.json" TRACE_EXTRA="--quantization fp8" \
    bash "$D/trace.sh" | head -45
done
