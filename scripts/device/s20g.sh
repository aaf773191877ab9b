#!/usr/bin/env bash
# Session 20's final check: the whole GPU suite on the final binaries (551adb6), then dserve_fp8_gemm_bench at
# DeepSeek-V3 shapes (issue 7's GEMM table, refreshed) and bench-one-batch FP8 batch 1 / 8 / 64 once.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
start=$(date +%s)
timeout 200 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm.csv" > "$OUT/fp8_gemm.log" 2>&1
echo "== fp8_gemm_bench rc=$? ($(( $(date +%s) - start )) s)"; head -3 "$OUT/fp8_gemm.log"
AB_BATCHES=1,8,64 AB_REPS=1 AB_BINS="dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
