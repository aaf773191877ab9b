#!/usr/bin/env bash
# Session 20: dserve_fp8_gemm_bench (graph-replayed calls, the per-GPU dispatch table, copy bandwidth measured eagerly).
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm.csv" > "$OUT/fp8_gemm.log" 2>&1
echo "== fp8_gemm_bench rc=$?"; head -3 "$OUT/fp8_gemm.log"
