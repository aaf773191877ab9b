#!/usr/bin/env bash
# Session 66, the budget's last minutes: the walks' 8-stage ring (DSERVE_MOE_WGMMA_STAGES=8: +0.6-0.9% at V2-Lite FP8
# batch 1 / 8 in s66e) at larger batches and on the V3-shaped FP8 model, against the default (6 for FP8), two rounds
# alternating. Binaries: dserve (~120 s).
set -u
source "$(dirname "$0")/lib.sh"
for round in 1 2; do
  b1b_run def_$round --quantization fp8 --batch-size 16 32 64 --output-len 32
  DSERVE_MOE_WGMMA_STAGES=8 b1b_run st8_$round --quantization fp8 --batch-size 16 32 64 --output-len 32
done
v3_config "$OUT/v3.json" 4
for tag in def st8; do
  env=(); [ $tag = st8 ] && env=(DSERVE_MOE_WGMMA_STAGES=8)
  timeout 100 env "${env[@]}" "$B/dserve" bench-one-batch --device cuda --model-path "$OUT/v3.json" \
    --load-format dummy --batch-size 1 8 32 --input-len 256 --output-len 32 > "$OUT/v3_$tag.log" 2>&1
  echo "== v3_$tag rc=$? $(grep -E 'Decode\.  median' "$OUT/v3_$tag.log" | sed 's/.*throughput: //' | tr '\n' ' ')"
done
