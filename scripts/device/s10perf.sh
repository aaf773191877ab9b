#!/usr/bin/env bash
# Issue 7, session 10: V2-Lite bench-one-batch (dummy weights, batch 1 and 64, input 512, output 32): prefill and
# decode for `--quantization fp8` with DSERVE_MOE_FP8_SEGMENTED off / on, and bf16, in one run (same machine).
# VARIANTS="fp8 0|fp8 1|bf16 0" by default (weights, segmented); each run ~100 s (dummy weights made on the host).
set -u
source "$(dirname "$0")/lib.sh"
IFS='|' read -r -a VS <<< "${VARIANTS:-fp8 0|fp8 1|bf16 0}"
for v in "${VS[@]}"; do
  set -- $v
  q=(); [ $1 = fp8 ] && q=(--quantization fp8)
  env DSERVE_MOE_FP8_SEGMENTED=$2 timeout 170 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy "${q[@]}" --batch-size 1,64 \
    --input-len 512 --output-len 32 > "$OUT/b1b_$1_seg$2.log" 2>&1
  echo "== b1b $1 segmented=$2 rc=$?"; grep -E "^Prefill|median" "$OUT/b1b_$1_seg$2.log" | head -6
done
