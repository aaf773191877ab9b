#!/usr/bin/env bash
# Issue 7: the demo model's bench-accuracy with --quantization fp8 run natively (DSERVE_FP8_NATIVE=1: every
# linear W8A8, the MoE experts on kernels/moe_fp8.h with their intermediate size padded 64 -> 128) against the
# dequantized FP8 weights (=0), 200 fresh arithmetic questions, 5 shots. Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
python3 scripts/make_arithmetic_questions.py --num 205 --seed 20261125 > "$OUT/a.jsonl"
port=31236
for native in 1 0; do
  DSERVE_FP8_NATIVE=$native "$B/dserve" serve --device cuda --model-path models/dserve-demo --port $port \
    --quantization fp8 > "$OUT/serve$native.log" 2>&1 &
  pid=$!
  for i in $(seq 1 120); do grep -q "ready on" "$OUT/serve$native.log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  timeout 120 "$B/dserve" bench-accuracy --port $port --data-path "$OUT/a.jsonl" --num-shots 5 --num-questions 200 \
    > "$OUT/accuracy$native.log" 2>&1
  echo "== accuracy (fp8 native=$native) rc=$?"; tail -4 "$OUT/accuracy$native.log"
  kill $pid; wait $pid 2>/dev/null
  tail -2 "$OUT/serve$native.log"
done
