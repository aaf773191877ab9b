#!/usr/bin/env bash
# Session 24: where a batch-1 decode step's time goes now, bf16 and --quantization fp8 (CUPTI trace of
# bench-one-batch, V2-Lite config, dummy weights, input 256, graphs), then plain bench-one-batch batch 1 both ways.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/bf16 TRACE_BS=1 bash "$(dirname "$0")/trace.sh"
OUT=$OUT/fp8 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" bash "$(dirname "$0")/trace.sh"
for q in "" "--quantization fp8"; do
  timeout 120 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 1 --input-len 256 --output-len 32 $q > "$OUT/b1b.log" 2>&1
  echo "== bench-one-batch $q rc=$?"; grep -E "^Decode\.  median" "$OUT/b1b.log"
done
