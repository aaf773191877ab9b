#!/usr/bin/env bash
# Issue 7: bench-one-batch on a DeepSeek-V3-shaped model (the real config with 3 layers: 1 dense + 2 MoE of 256
# experts, no MTP layer: what fits one H100 in bf16 too), dummy block-FP8 weights, run natively
# (DSERVE_FP8_NATIVE=1) vs dequantized to bf16 at load. Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
v3_config "$OUT/v3l3.json" 3
for native in 1 0; do
  DSERVE_FP8_NATIVE=$native timeout 240 "$B/dserve" bench-one-batch --device cuda --model-path "$OUT/v3l3.json" \
    --load-format dummy --batch-size 1,64 --input-len 256 --output-len 16 > "$OUT/native$native.log" 2>&1
  echo "== v3 3-layer fp8 native=$native rc=$?"; grep -E "^Prefill|median|Memory plan|rror" "$OUT/native$native.log"
done
