#!/usr/bin/env bash
# Session 68: what --enable-return-hidden-states (each graph replay copies its hidden rows) and
# --enable-return-routed-experts (a recording launch a MoE layer) cost a decode step: bench-one-batch V2-Lite FP8
# (dummy weights, input 256, output 32, CUDA graphs) batch 1 / 64, with both flags vs without, two rounds alternating.
# Binaries: dserve (~90 s).
set -u
source "$(dirname "$0")/lib.sh"
for round in 1 2; do
  b1b_run base_$round --quantization fp8 --batch-size 1 64 --output-len 32
  b1b_run flags_$round --quantization fp8 --batch-size 1 64 --output-len 32 --enable-return-hidden-states \
    --enable-return-routed-experts
done
