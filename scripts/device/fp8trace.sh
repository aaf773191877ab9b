#!/usr/bin/env bash
# Issue 7: where a V2-Lite `--quantization fp8` decode step goes with the experts in FP8 (DSERVE_FP8_NATIVE=1),
# batch 1 (trace.sh's CUPTI tracer and summary), next to the bf16 step in the same run.
set -u
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT/fp8" "$OUT/bf16"
DSERVE_FP8_NATIVE=1 OUT="$OUT/fp8" TRACE_EXTRA="--quantization fp8" bash scripts/device/trace.sh
OUT="$OUT/bf16" bash scripts/device/trace.sh
