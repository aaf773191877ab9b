#!/usr/bin/env bash
# bench-serving matrix on one GPU (issue 8): DeepSeek-V2-Lite config, dummy bf16 weights, random-ids
# 1K in / 256 out, request rates 1, 4, 16, inf at max concurrency 64 and 256. Binaries in .devbin/,
# logs under $OUT. Prompt counts are small so the matrix fits a few minutes (SERVING_SCALE multiplies).
set -u
source "$(dirname "$0")/lib.sh"
SCALE=${SERVING_SCALE:-1}
EXTRA=${SERVE_EXTRA:---max-total-tokens 400000}
$B/dserve serve --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy \
  --skip-tokenizer-init --port 31000 --max-running-requests 256 $EXTRA > "$OUT/serve.log" 2>&1 &
pid=$!
for i in $(seq 300); do grep -q "ready on" "$OUT/serve.log" && break; kill -0 $pid 2>/dev/null || break; sleep 1; done
grep -E "ready|rror|KV Cache|graph" "$OUT/serve.log" | head -5
cell() {  # rate concurrency prompts
  echo "== rate $1 max-concurrency $2 prompts $3"
  timeout 200 $B/dserve bench-serving --backend sglang --port 31000 --dataset-name random-ids \
    --random-ids-vocab-size 100000 --random-input-len 1024 --random-output-len 256 --random-range-ratio 1.0 \
    --num-prompts "$3" --request-rate "$1" --max-concurrency "$2" --seed 1 --disable-tqdm \
    --output-file "$OUT/serving.jsonl" 2>&1 |
    grep -E "Successful|duration|Output token throughput|Total token|Concurrency|Mean TTFT|P99 TTFT|Mean TPOT|P99 TPOT|Median ITL|Mean E2E|Total generated"
}
for conc in 64 256; do
  cell 1 $conc $((16 * SCALE))
  cell 4 $conc $((32 * SCALE))
  cell 16 $conc $((64 * SCALE))
  cell inf $conc $((conc * SCALE))
done
kill $pid; wait $pid
