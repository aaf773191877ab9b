#!/usr/bin/env bash
# Session 26, last call: the MoE decode kernels' shared tile store (small_m::store_tile in small_m_tile.cuh, used by
# moe_gemm.cu's bf16 small-M kernel and moe_fp8.cu's two kernels; PTX of their epilogues moved): every MoE and
# fixture GPU test (sharded), then bench-one-batch V2-Lite dummy bf16 and --quantization fp8 at batch 1 and 8.
set -u
source "$(dirname "$0")/lib.sh"
SUITE_LIMIT=150 GTEST_FILTER='*Moe*:*Fixture*:*MoE*' OUT=$OUT/tests bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,8 AB_CONFIGS="base" OUT=$OUT/bf16 bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base" OUT=$OUT/fp8 bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
