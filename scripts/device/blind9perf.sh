#!/usr/bin/env bash
# Issue 7, session 9's blind CUDA work, timings (tests: blind9.sh). V2-Lite `--quantization fp8` bench-one-batch:
# prefill 64 x 512 and 1 x 512 with DSERVE_MOE_FP8_SEGMENTED off / on next to bf16, the traced 64 x 512 prefill
# with it on (fp8prefill.sh), and decode batch 1 / 64 with DSERVE_FP8_FUSED_NORM / DSERVE_MOE_FUSED_SHARED on / off
# and PDL off (FP8), and bf16 decode with DSERVE_MOE_FUSED_SHARED on / off, same run.
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
# FP8 decode: the norms' FP8 activations, the shared expert added in the combine, PDL off; bf16 with / without the
# fused shared add. Same run.
for v in "fp8 both 1 1 1" "fp8 norm 1 0 1" "fp8 shared 0 1 1" "fp8 plain 0 0 1" "fp8 nopdl 0 0 0" "bf16 shared 0 1 1" \
         "bf16 plain 0 0 1"; do
  set -- $v
  q=(); [ $1 = fp8 ] && q=(--quantization fp8)
  env DSERVE_FP8_FUSED_NORM=$3 DSERVE_MOE_FUSED_SHARED=$4 DSERVE_PDL=$5 timeout 120 "$B/dserve" bench-one-batch \
    --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy "${q[@]}" \
    --batch-size 1,64 --input-len 256 --output-len 32 > "$OUT/b1b_$1_$2.log" 2>&1
  echo "== b1b $1 decode $2 (fused norm $3, fused shared $4, PDL $5) rc=$?"; grep -E "median" "$OUT/b1b_$1_$2.log" | head -4
done
