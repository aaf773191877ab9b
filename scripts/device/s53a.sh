#!/usr/bin/env bash
# Prepared in session 52 for the next session's first call (binaries dserve, ds_ops_cuda_gpu_test): the GPU suite, then
# the opt-in DSERVE_FP8_FUSED_NORM_WGMMA=1 (norms / MLA combine quantize past 8 rows for a consumer on the wgmma FP8 GEMM; written
# without device time). Its GPU case and the FP8 GEMM / fixture cases (default and under the switch, which also hands
# the MoE layers an FP8 input past 8 rows), then bench-one-batch V2-Lite FP8 at 48 / 64 and the V3-shaped 3-layer
# model at 48 / 64, default against the switch, alternating.
set -u
source "$(dirname "$0")/lib.sh"
# First the whole GPU suite: session 52's review moved every TMA kernel's tensor-map encoding into one helper
# (kernels/tensor_map.h encode_2d_swizzle128; kernels' SASS unchanged, host code not yet run on a GPU).
SUITE_LIMIT=170 bash "$(dirname "$0")/gpusuite.sh"
gtest_run fp8 150 'Fp8GemmGpu.*:*Fp8Fixture*:*MoeFp8*'
DSERVE_FP8_FUSED_NORM_WGMMA=1 gtest_run fp8_fnw 150 'Fp8GemmGpu.*:*Fp8Fixture*:*MoeFp8*:*Fixture*'
grep -E "^\[  FAILED" "$OUT/fp8.log" "$OUT/fp8_fnw.log" | head
AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="base fnw" AB_CFG_base=base AB_CFG_fnw=DSERVE_FP8_FUSED_NORM_WGMMA=1 \
  AB_ROUNDS=2 bash "$(dirname "$0")/abbin.sh"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="base fnw" AB_CFG_base=base \
  AB_CFG_fnw=DSERVE_FP8_FUSED_NORM_WGMMA=1 AB_ROUNDS=1 OUT=$OUT/v3 bash "$(dirname "$0")/abbin.sh"
