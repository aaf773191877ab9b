#!/usr/bin/env bash
# Prepared in session 31 (~200 s; binaries dserve, libds_cupti_trace.so): (1) the FP8 and bf16 batch-1 traces on
# session 31's code, one layer's timeline (where the chain is now); (2) the MoE-summing norm's marginal cost in the
# chain (DSERVE_DUP_KERNELS launches it twice; dummy weights, so the doubled residual add does not matter to the
# timing), FP8 and bf16 batch 1: the most a fusion of that norm into the q / kv_a GEMM could save (H100, session 17:
# a norm cost the chain 1.9 us).
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/trace_fp8 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" \
  bash "$(dirname "$0")/trace.sh" | sed -n '/^timeline/,$p'
OUT=$OUT/trace_bf16 TRACE_BS=1 TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" \
  bash "$(dirname "$0")/trace.sh" | sed -n '/^timeline/,$p'
DUP=DSERVE_DUP_KERNELS=rms_norm_vec_kernelILi1ELb1E
AB_BATCHES=1 AB_CONFIGS="base $DUP base $DUP" OUT=$OUT/dup bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_EXTRA="--quantization fp8" AB_BATCHES=1 AB_CONFIGS="base $DUP" OUT=$OUT/dup bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
