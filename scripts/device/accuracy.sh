#!/usr/bin/env bash
# The demo model's bench-accuracy on CUDA (issue 6 acceptance: within 1 point of the CPU score): 200 fresh
# arithmetic questions, 5 shots, against `dserve serve --device cuda` (then --quantization fp8 and an fp8 KV
# cache). Binary: .devbin/dserve. Logs under $OUT.
set -u
source "$(dirname "$0")/lib.sh"
python3 scripts/make_arithmetic_questions.py --num 205 --seed 20261122 > "$OUT/a.jsonl"
port=31234
for extra in "" "--quantization fp8" "--kv-cache-dtype fp8_e4m3"; do
  tag=$(echo "cuda $extra" | tr ' -' '__')
  "$B/dserve" serve --device cuda --model-path models/dserve-demo --port $port $extra > "$OUT/serve$tag.log" 2>&1 &
  pid=$!
  for i in $(seq 1 120); do grep -q "ready on" "$OUT/serve$tag.log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  timeout 120 "$B/dserve" bench-accuracy --port $port --data-path "$OUT/a.jsonl" --num-shots 5 --num-questions 200 \
    > "$OUT/accuracy$tag.log" 2>&1
  echo "== accuracy ($extra) rc=$?"; tail -4 "$OUT/accuracy$tag.log"
  kill $pid; wait $pid 2>/dev/null
  tail -2 "$OUT/serve$tag.log"
done
