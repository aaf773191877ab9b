#!/usr/bin/env bash
# Session 32 (~200 s; binary dserve): the FP8 small-M GEMMs quantizing their own activations at <= 8 tokens
# (DSERVE_FP8_FUSED_SMALL_M=qps; default ps) on today's schedule. Session 29 measured it losing (1.97-2.02 vs 1.82
# ms) while the shared MLP forked before the routing and contended with it; the fork is after the routing now and
# the norms write x's FP8, so q only removes the quant_act launches before o_proj (main chain) and before the
# shared down (the side chain, which ends after the routed down at batch 1: s32b trace). FP8 batch 1 / 8, two rounds.
set -u
source "$(dirname "$0")/lib.sh"
F=DSERVE_FP8_FUSED_SMALL_M=qps
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base $F base $F" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
