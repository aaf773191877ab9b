#!/usr/bin/env bash
# Issue 7: V2-Lite FP8 prefill with the re-measured tune-moe table (grouped up to 1024 tokens), batch 1 / 8 / 64 x
# 512 tokens, bf16 in the same run.
set -u
source "$(dirname "$0")/lib.sh"
for w in fp8 bf16; do
  q=(); [ $w = fp8 ] && q=(--quantization fp8)
  timeout 120 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy "${q[@]}" --batch-size 1,8,64 --input-len 512 --output-len 4 > "$OUT/b1b_$w.log" 2>&1
  echo "== $w rc=$? prefill tok/s b1/b8/b64: $(grep -E "^Prefill\." "$OUT/b1b_$w.log" | awk '{print $6}' | tr '\n' ' ')"
done
