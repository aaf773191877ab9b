#!/usr/bin/env bash
# Overlap schedule A/B through the server (issue 6): DeepSeek-V2-Lite config, dummy bf16, random-ids 1K in /
# 256 out, saturated cells at max concurrency 1, 16 and 64, with the overlap schedule (default) and with
# --disable-overlap-schedule. Binary: .devbin/dserve; logs under $OUT.
set -u
source "$(dirname "$0")/lib.sh"
for mode in overlap serial; do
  flag=""; [ $mode = serial ] && flag="--disable-overlap-schedule"
  $B/dserve serve --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy \
    --skip-tokenizer-init --port 31000 --max-running-requests 64 --max-total-tokens 200000 $flag \
    > "$OUT/serve_$mode.log" 2>&1 &
  pid=$!
  for i in $(seq 300); do grep -q "ready on" "$OUT/serve_$mode.log" && break; kill -0 $pid 2>/dev/null || break; sleep 1; done
  for spec in 1:4 16:32 64:64; do
    conc=${spec%%:*}; n=${spec#*:}
    echo "== $mode max-concurrency $conc prompts $n"
    timeout 150 $B/dserve bench-serving --backend sglang --port 31000 --dataset-name random-ids \
      --random-ids-vocab-size 100000 --random-input-len 1024 --random-output-len 256 --random-range-ratio 1.0 \
      --num-prompts $n --request-rate inf --max-concurrency $conc --seed 1 --disable-tqdm \
      --output-file "$OUT/overlap.jsonl" 2>&1 |
      grep -E "Successful|Output token throughput|Mean TTFT|Median TPOT|Median ITL|P99 ITL|Total generated"
  done
  kill $pid; wait $pid
done
