#!/usr/bin/env bash
# Issue 7 / 6, session 9's blind CUDA work, decode timings (tests: blind9.sh): V2-Lite bench-one-batch batch 1 / 64,
# input 256, `--quantization fp8` with DSERVE_FP8_FUSED_NORM and DSERVE_MOE_FUSED_SHARED on / off and PDL off, and
# bf16 with DSERVE_MOE_FUSED_SHARED on / off, same run.
set -u
source "$(dirname "$0")/lib.sh"
# FP8 decode: the norms' FP8 activations, the shared expert added in the combine, PDL off; bf16 with / without the
# fused shared add. Same run.
# CONFIGS="name1 name2 ..." runs a subset (by <weights>_<name>, e.g. fp8_both bf16_plain).
ALL=("fp8 both 1 1 1" "fp8 norm 1 0 1" "fp8 shared 0 1 1" "fp8 plain 0 0 1" "fp8 nopdl 0 0 0" "bf16 shared 0 1 1"
     "bf16 plain 0 0 1")
for v in "${ALL[@]}"; do
  set -- $v
  if [ -n "${CONFIGS:-}" ] && [[ " $CONFIGS " != *" $1_$2 "* ]]; then continue; fi
  q=(); [ $1 = fp8 ] && q=(--quantization fp8)
  env DSERVE_FP8_FUSED_NORM=$3 DSERVE_MOE_FUSED_SHARED=$4 DSERVE_PDL=$5 timeout 120 "$B/dserve" bench-one-batch \
    --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy "${q[@]}" \
    --batch-size 1,64 --input-len 256 --output-len 32 > "$OUT/b1b_$1_$2.log" 2>&1
  echo "== b1b $1 decode $2 (fused norm $3, fused shared $4, PDL $5) rc=$?"; grep -E "median" "$OUT/b1b_$1_$2.log" | head -4
done
