#!/usr/bin/env bash
# Issue 7: which part of DSERVE_FP8_FUSED_SMALL_M pays (q: in-kernel quantization at M <= 8, p: the q / kv_a pair
# in one launch, s: the SiLU epilogue), V2-Lite bench-one-batch FP8 batch 1 and 64 (input 512, output 32), one
# process per variant, same run. VARIANTS overrides the list ("0" = all off).
set -u
source "$(dirname "$0")/lib.sh"
for f in ${VARIANTS:-0 q p s ps 1 0}; do
  env DSERVE_FP8_FUSED_SMALL_M=$f timeout 120 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 1,64 \
    --input-len 512 --output-len 32 > "$OUT/b1b_$f.log" 2>&1
  echo "== fused=$f rc=$? decode b1/b64: $(grep -E "^Decode\.  median" "$OUT/b1b_$f.log" | awk "{print \$4}" | tr '\n' ' ')"
done
