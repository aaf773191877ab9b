#!/usr/bin/env bash
# Session 24: FP8 decode kernels held to more CTAs per SM by registers (the gated MoE small-M shape at four, the
# one-token staged dense small-M shapes at three). The whole GPU suite on these binaries (models/ left behind),
# then bench-one-batch (V2-Lite, dummy, --quantization fp8, batch 1 and 8) alternating: both bounds (default) /
# DSERVE_MOE_FP8_GATE_OCC=0 / DSERVE_FP8_SMALL_M_OCC=0 / both off, twice.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite SUITE_LIMIT=220 bash "$(dirname "$0")/gpusuite.sh"
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
    AB_CONFIGS="base DSERVE_MOE_FP8_GATE_OCC=0 DSERVE_FP8_SMALL_M_OCC=0 DSERVE_MOE_FP8_GATE_OCC=0,DSERVE_FP8_SMALL_M_OCC=0" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
