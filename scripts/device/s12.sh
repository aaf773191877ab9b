#!/usr/bin/env bash
# Session 12's closing measurements (issue 6): bench-one-batch V2-Lite dummy (input 256 / output 32, graphs) at
# batch 1 / 8 / 64 / 256 in bf16 and with --quantization fp8, then the split-plan context A/B at batch 1 / 8.
set -u
source "$(dirname "$0")/lib.sh"
for extra in "" "--quantization fp8"; do
  start=$(date +%s)
  timeout 150 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 1,8,64,256 --input-len 256 --output-len 32 $extra > "$OUT/b1b.log" 2>&1
  echo "== bench-one-batch $extra rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^(Prefill\.|Decode\.  median)" "$OUT/b1b.log"
done
AB_CONFIGS="base DSERVE_GRAPH_PLAN_CONTEXT=64 DSERVE_GRAPH_PLAN_CONTEXT=512 DSERVE_GRAPH_PLAN_CONTEXT=1024 base" bash scripts/device/ab.sh
