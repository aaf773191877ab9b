#!/usr/bin/env bash
# Session 59: where a speculative step's time goes on the V3 3-layer + MTP dummy FP8 model (specserve: plain 1.45 ms
# TPOT at concurrency 1, NGRAM verify 1.86, NEXTN 5.45): plain decoding with overlap scheduling off (as every
# speculative step runs), concurrency 1 and 8.
set -u
source "$(dirname "$0")/lib.sh"
v3_config "$OUT/v3mtp.json" 3 mtp
$B/dserve serve --device cuda --model-path "$OUT/v3mtp.json" --load-format dummy --skip-tokenizer-init --port 31301 \
  --max-running-requests 16 --max-total-tokens 65536 --cuda-graph-max-bs 16 --disable-overlap-schedule \
  > "$OUT/serve_nooverlap.log" 2>&1 &
pid=$!
wait_ready "$OUT/serve_nooverlap.log" $pid 120
for conc in 1 8; do
  echo "== plain, overlap off, concurrency $conc"
  bench_random 31301 $conc 64 64
done
kill $pid; wait $pid 2>/dev/null
