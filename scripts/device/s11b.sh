#!/usr/bin/env bash
# Issue 7, session 11: where a V2-Lite FP8 decode step goes with this session's defaults (CUPTI trace, batch 1
# and 64, input 256), then the FP8 GEMM tuning tables (tune.sh) on the changed small-M kernel.
set -u
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT/trace" "$OUT/tune"
DSERVE_FP8_NATIVE=1 OUT="$OUT/trace" TRACE_BS="1 64" TRACE_EXTRA="--quantization fp8" timeout 230 bash scripts/device/trace.sh
OUT="$OUT/tune" timeout 330 bash scripts/device/tune.sh
