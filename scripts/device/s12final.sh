#!/usr/bin/env bash
# Session 12's last call: bench-one-batch V2-Lite dummy (input 256 / output 32, graphs) at batch 1 / 8 / 64 / 256,
# bf16 and --quantization fp8, on the final binaries (the whole GPU suite runs beside it in all.sh).
set -u
source "$(dirname "$0")/lib.sh"
for extra in "" "--quantization fp8"; do
  timeout 150 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 1,8,64,256 --input-len 256 --output-len 32 $extra > "$OUT/b1b.log" 2>&1
  echo "== bench-one-batch $extra rc=$?"; grep -E "^(Prefill\.|Decode\.  median)" "$OUT/b1b.log"
done
