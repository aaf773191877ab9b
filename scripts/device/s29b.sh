#!/usr/bin/env bash
# Session 29, second call: where a batch-1 FP8 layer's time goes now (graph arena on), and why the fused
# quantizations lose: the CUPTI trace of bench-one-batch V2-Lite dummy --quantization fp8 batch 1, default, then
# DSERVE_FP8_FUSED_NORM=1 and DSERVE_FP8_FUSED_SMALL_M=qps, each with the per-kernel table and one MoE layer's
# timeline (trace_summary.py --timeline). Then bf16 batch 1 default. Binaries: dserve, libds_cupti_trace.so.
set -u
source "$(dirname "$0")/lib.sh"
for cfg in base DSERVE_FP8_FUSED_NORM=1 DSERVE_FP8_FUSED_SMALL_M=qps; do
  envs=()
  [ "$cfg" = base ] || envs=("$cfg")
  echo "######## trace fp8 $cfg"
  env "${envs[@]}" OUT=$OUT/trace_$cfg TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
    TRACE_SUMMARY_ARGS="--timeline rms_norm_vec_kernel<1,true> 12" bash "$(dirname "$0")/trace.sh"
done
echo "######## trace bf16 base"
OUT=$OUT/trace_bf16 TRACE_BS=1 TRACE_SUMMARY_ARGS="--timeline rms_norm_vec_kernel<1,true> 12" bash "$(dirname "$0")/trace.sh"
