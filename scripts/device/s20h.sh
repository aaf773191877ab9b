#!/usr/bin/env bash
# Session 20: dserve_fp8_gemm_bench with the calls replayed from a CUDA graph and the per-GPU dispatch table loaded
# (as dserve runs them), the FP8 GEMM tests (the table's loader moved to ops/cuda/tuning_file), FP8 bench-one-batch.
set -u
source "$(dirname "$0")/lib.sh"
start=$(date +%s)
timeout 200 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm.csv" > "$OUT/fp8_gemm.log" 2>&1
echo "== fp8_gemm_bench rc=$? ($(( $(date +%s) - start )) s)"; head -3 "$OUT/fp8_gemm.log"
OUT=$OUT/tests GTEST_FILTER='Fp8GemmGpu.*:MoeFp8Test.*' SUITE_LIMIT=150 bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,64 AB_REPS=1 AB_BINS="dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
