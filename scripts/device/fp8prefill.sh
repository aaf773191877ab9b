#!/usr/bin/env bash
# Issue 7: where V2-Lite's 64 x 512 prefill goes with --quantization fp8 (native) vs bf16: bench-one-batch
# (warm-up + measured pass, output length 2) under the CUPTI tracer, every kernel summed by name (--all).
set -u
source "$(dirname "$0")/lib.sh"
for v in "fp8 --quantization fp8" "bf16"; do
  set -- $v; tag=$1; shift
  timeout 200 env DSERVE_TRACE_OUT="$OUT/trace_$tag.csv" LD_PRELOAD="$PWD/$B/libds_cupti_trace.so" "$B/dserve" \
    bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy \
    --batch-size ${PREFILL_BS:-64} --input-len 512 --output-len 2 "$@" > "$OUT/b1b_$tag.log" 2>&1
  echo "== traced prefill $tag rc=$?"
  grep -E "^Prefill|cupti_trace" "$OUT/b1b_$tag.log"
  python3 scripts/device/trace_summary.py "$OUT/trace_$tag.csv" --all | tee "$OUT/summary_$tag.txt" | head -30
  rm -f "$OUT/trace_$tag.csv"
done
