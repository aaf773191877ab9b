#!/usr/bin/env bash
# Issue 7, session 9's blind CUDA work, prefill timings (tests: blind9.sh; decode: blind9dec.sh). V2-Lite
# `--quantization fp8` bench-one-batch prefill 64 x 512 and 1 x 512 with DSERVE_MOE_FP8_SEGMENTED off / on next to
# bf16, same run, and the traced 64 x 512 prefill with it on (fp8prefill.sh).
set -u
source "$(dirname "$0")/lib.sh"
for v in "bf16 x" "fp8 0" "fp8 1"; do
  set -- $v
  q=(); [ $1 = fp8 ] && q=(--quantization fp8)
  env DSERVE_MOE_FP8_SEGMENTED=$2 timeout 150 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy "${q[@]}" --batch-size 1,64 \
    --input-len 512 --output-len 4 > "$OUT/b1b_$1_seg$2.log" 2>&1
  echo "== b1b $1 segmented=$2 rc=$?"; grep -E "^Prefill|median" "$OUT/b1b_$1_seg$2.log" | head -6
done
mkdir -p "$OUT/trace"
DSERVE_MOE_FP8_SEGMENTED=1 OUT="$OUT/trace" timeout 200 bash scripts/device/fp8prefill.sh
