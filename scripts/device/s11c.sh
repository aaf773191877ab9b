#!/usr/bin/env bash
# Issue 7, session 11: V2-Lite bench-one-batch decode and prefill, `--quantization fp8` (this session's defaults:
# fused small-M pair + SiLU, grid-sized prefetch, MoE tile by load) against bf16 in the same run, batch 1 to 256,
# input 512, output 32.
set -u
source "$(dirname "$0")/lib.sh"
for w in fp8 bf16; do
  q=(); [ $w = fp8 ] && q=(--quantization fp8)
  timeout 150 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy "${q[@]}" --batch-size 1,8,32,64,128,256 --input-len 512 --output-len 32 > "$OUT/b1b_$w.log" 2>&1
  echo "== $w rc=$? prefill tok/s: $(grep -E "^Prefill\." "$OUT/b1b_$w.log" | awk '{print $6}' | tr '\n' ' ')"
  echo "   decode median s: $(grep -E "^Decode\.  median" "$OUT/b1b_$w.log" | awk "{print \$4}" | tr '\n' ' ')"
done
