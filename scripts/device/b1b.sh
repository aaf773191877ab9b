#!/usr/bin/env bash
# bench-one-batch on the DeepSeek-V2-Lite config (dummy bf16, input 256 / output 32) at batch 1, 8, 64, 256 with
# CUDA graphs (issue 6's table; B1B_EXTRA adds flags, e.g. --disable-cuda-graph). Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
start=$(date +%s)
timeout 280 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
  --load-format dummy --batch-size ${B1B_BATCHES:-1,8,64,256} --input-len 256 --output-len 32 ${B1B_EXTRA:-} > "$OUT/b1b.log" 2>&1
echo "== bench-one-batch rc=$? ($(( $(date +%s) - start )) s)"
grep -vE "^\[|^$" "$OUT/b1b.log" | tail -40
