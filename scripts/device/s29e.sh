#!/usr/bin/env bash
# Session 29, fifth call: on the new FP8 defaults, (1) where the norms' FP8 quantization stops paying (batch 16 /
# 32 against DSERVE_FP8_FUSED_NORM=0; batch 64 lost 0.5% in s29d), (2) the small-M GEMMs quantizing their own
# inputs (the `q` of DSERVE_FP8_FUSED_SMALL_M) at batch 1 only (DSERVE_FP8_FUSED_QUANT_MAX_M=1): o_proj and the
# shared down lose their quant_act launch. The FP8 fixture / GEMM tests under that setting first.
# Binaries: dserve, ds_ops_cuda_gpu_test.
set -u
source "$(dirname "$0")/lib.sh"
DSERVE_FP8_FUSED_SMALL_M=qps DSERVE_FP8_FUSED_QUANT_MAX_M=1 GTEST_FILTER='*Fp8*:*Fixture*' SUITE_LIMIT=100 \
  OUT=$OUT/suite timeout 110 bash "$(dirname "$0")/gpusuite.sh"
Q=DSERVE_FP8_FUSED_SMALL_M=qps,DSERVE_FP8_FUSED_QUANT_MAX_M=1
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8,16,32 AB_CONFIGS="base $Q DSERVE_FP8_FUSED_NORM=0 base $Q" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
