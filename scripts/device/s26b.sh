#!/usr/bin/env bash
# Session 26, second call (H200): the whole GPU suite on the FP8 MoE two-stage walk as the default (and the small-M
# kernels' shared tile helpers), bench-one-batch FP8 A/B default / DSERVE_MOE_FP8_PIPE=0 at batch 1, 8, 64, and the
# batch-1 FP8 CUPTI trace (per-kernel table on the H200).
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8,64 AB_CONFIGS="base DSERVE_MOE_FP8_PIPE=0" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
OUT=$OUT/fp8trace TRACE_BS=1 TRACE_EXTRA="--quantization fp8" bash "$(dirname "$0")/trace.sh" | head -60
timeout 90 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm.csv" > "$OUT/fp8_gemm.log" 2>&1
echo "== fp8_gemm_bench rc=$?"; grep -iE "copy|device" "$OUT/fp8_gemm.log" | head -3
