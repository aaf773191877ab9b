#!/usr/bin/env bash
# Session 51: where the larger batches' decode steps go (FP8 batch 64 at ~0.60 of its weight roofline, bf16 batch 256
# at 0.67): CUPTI traces of V2-Lite (dummy) FP8 b64, bf16 b64 and bf16 b256, per-layer timelines and kernel totals.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
OUT=$OUT/fp8_64 TRACE_BS=64 TRACE_EXTRA="--quantization fp8" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py fp8_64 "$OUT/fp8_64/trace_bs64.csv" --replays 1 2>/dev/null | head -30
sed -n 1,30p "$OUT/fp8_64/summary_bs64.txt"
OUT=$OUT/bf16_256 TRACE_BS=256 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py bf16_256 "$OUT/bf16_256/trace_bs256.csv" --replays 1 2>/dev/null | head -30
sed -n 1,30p "$OUT/bf16_256/summary_bs256.txt"
