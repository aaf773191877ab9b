#!/usr/bin/env bash
# Session 49, last call (binary dserve at the landed tree; models/ carried, tests/fixtures not): the engine checks on
# CUDA again (bench-one-batch's memory-plan error now names --batch-size), then bench-one-batch 1,8 bf16 / FP8 once.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 python3 scripts/device/engine_checks_cuda.py "$PWD/$B/dserve" models/dserve-demo \
  tests/data/configs/deepseek-v2-lite.json 2>&1 | tee "$OUT/engine_checks.log" | grep CHECK
b1b_run bf16 --batch-size 1,8 --output-len 32
b1b_run fp8 --batch-size 1,8 --output-len 32 --quantization fp8
