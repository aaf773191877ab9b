#!/usr/bin/env bash
# Session 66, second call: where a V2-Lite FP8 batch-1 decode step goes now (CUPTI trace, graphs) for this build and
# main's (fd85cc7, $B/main: s66a's kernels before), so the per-kernel deltas of s66a's change show; then the source
# pages of one eager decode step's first 40 kernels (as s65g) for the next code-generation defects.
# Binaries: dserve, libds_cupti_trace.so (~200 s).
set -u
source "$(dirname "$0")/lib.sh"
for tag in new main; do
  bin=$B; [ $tag = main ] && bin=$B/main
  timeout 150 env DSERVE_TRACE_OUT="$OUT/trace_$tag.csv" LD_PRELOAD="$PWD/$B/libds_cupti_trace.so" "$bin/dserve" \
    bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy \
    --quantization fp8 --batch-size 1 --input-len 256 --output-len 8 > "$OUT/b1b_$tag.log" 2>&1
  echo "== traced $tag rc=$?"
  grep -E "^Decode\.  median" "$OUT/b1b_$tag.log"
  python3 scripts/device/trace_summary.py "$OUT/trace_$tag.csv" > "$OUT/summary_$tag.txt" 2>&1
  head -40 "$OUT/summary_$tag.txt"
done
ncu_decode_pages decode_fp8 --quantization fp8
