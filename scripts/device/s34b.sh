#!/usr/bin/env bash
# Prepared in session 33 (~150 s; binaries dserve, libds_cupti_trace.so): one layer's timeline on today's code
# (s32b's were before the walks' empty-slot stop): FP8 batch 1 and batch 8 (where the stop won 4%), bf16 batch 8.
# For each MoE walk / one-round GEMM: its start after the routing's end and its end, i.e. its ramp and its rate.
set -u
source "$(dirname "$0")/lib.sh"
for bs in 1 8; do
  OUT=$OUT/trace_fp8_$bs TRACE_BS=$bs TRACE_EXTRA="--quantization fp8" TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" \
    bash "$(dirname "$0")/trace.sh" | sed -n '/^timeline/,$p'
done
for bs in 1 8; do
  OUT=$OUT/trace_bf16_$bs TRACE_BS=$bs TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" \
  bash "$(dirname "$0")/trace.sh" | sed -n '/^timeline/,$p'
done
