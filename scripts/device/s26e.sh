#!/usr/bin/env bash
# Session 26, fifth call: on the H200, the FP8 decode switches that were measured and left off on the H100 (where
# the copy ceiling is 3.0 TB/s, not 4.2, so the weight streams were longer next to the launch chain), A/B against
# the default, two alternating rounds: bench-one-batch V2-Lite dummy --quantization fp8, batch 1 and 8.
# DSERVE_FP8_FUSED_NORM=1 (the norm writes x's FP8 quantization: three quant_act launches a layer fewer, among them
# the one between the routing and the routed gate|up), DSERVE_FP8_FUSED_SMALL_M=qps (the small-M GEMMs quantize
# their own x), DSERVE_MOE_GATE_ROUTE=1 (router GEMM + routing + grouping in one launch).
set -u
source "$(dirname "$0")/lib.sh"
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
    AB_CONFIGS="base DSERVE_FP8_FUSED_NORM=1 DSERVE_FP8_FUSED_SMALL_M=qps DSERVE_MOE_GATE_ROUTE=1" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
