#!/usr/bin/env bash
# Session 12's closing measurements (issue 6): bench-one-batch V2-Lite dummy (input 256 / output 32, graphs) at
# batch 1 / 8 / 64 / 256 in bf16 and with --quantization fp8, then the split-plan context A/B at batch 1 / 8.
set -u
source "$(dirname "$0")/lib.sh"
bash "$(dirname "$0")/s12final.sh"
AB_CONFIGS="base DSERVE_GRAPH_PLAN_CONTEXT=64 DSERVE_GRAPH_PLAN_CONTEXT=512 DSERVE_GRAPH_PLAN_CONTEXT=1024 base" bash scripts/device/ab.sh
