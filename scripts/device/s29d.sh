#!/usr/bin/env bash
# Session 29, fourth call: the new FP8 defaults (decode norms write x's FP8 quantization, DSERVE_FP8_FUSED_NORM
# on; the shared MLP forks after the routing where that quantization exists, ModelOptions::SharedFork::kAuto).
# The whole GPU suite on them, then bench-one-batch V2-Lite dummy FP8 batch 1 / 8 / 64, default vs
# DSERVE_FP8_FUSED_NORM=0 (the old schedule), two rounds alternating; bf16 batch 1 / 8 once (unchanged path).
# Binaries: dserve, ds_ops_cuda_gpu_test.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite timeout 200 bash "$(dirname "$0")/gpusuite.sh"
grep -h "shared after route" "$OUT"/suite/*.log
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8,64 \
  AB_CONFIGS="base DSERVE_FP8_FUSED_NORM=0 base DSERVE_FP8_FUSED_NORM=0" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_BATCHES=1,8 AB_CONFIGS="base" OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
