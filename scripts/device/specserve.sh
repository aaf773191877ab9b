#!/usr/bin/env bash
# Speculative decoding on CUDA, speed (session 58): the real DeepSeek-V3 config cut to 3 layers plus its MTP layer,
# dummy block-FP8 weights (so the MTP drafts are near-random: acceptance ~0, the cost of a verify step and the
# drafter against a plain decode step), served plain and with --speculative-algorithm NEXTN 3 steps (verify + draft
# graphs), with the eager drafter after graph verify steps (DSERVE_SPEC_DRAFT_GRAPHS=0), and with graphs off
# (--disable-cuda-graph) for the eager cost, and NGRAM drafts (verify graphs, no drafter forward). bench-serving random-ids 64 in / 64 out at
# concurrency 1 and 8. Logs under $OUT.
set -u
source "$(dirname "$0")/lib.sh"
v3_config "$OUT/v3mtp.json" 3 mtp
port=31100
for cfg in plain spec spec_eagerdraft spec_eager ngram; do
  extra=()
  envs=()
  [ "$cfg" = spec_eagerdraft ] && extra=(--speculative-algorithm NEXTN --speculative-num-steps 3) &&
    envs=(DSERVE_SPEC_DRAFT_GRAPHS=0)
  [ "$cfg" = spec ] && extra=(--speculative-algorithm NEXTN --speculative-num-steps 3)
  [ "$cfg" = ngram ] && extra=(--speculative-algorithm NGRAM --speculative-num-draft-tokens 4)
  [ "$cfg" = spec_eager ] && extra=(--speculative-algorithm NEXTN --speculative-num-steps 3 --disable-cuda-graph)
  port=$((port + 1))
  env "${envs[@]}" $B/dserve serve --device cuda --model-path "$OUT/v3mtp.json" --load-format dummy \
    --skip-tokenizer-init --port $port --max-running-requests 16 --max-total-tokens 65536 --cuda-graph-max-bs 16 \
    "${extra[@]}" > "$OUT/serve_$cfg.log" 2>&1 &
  pid=$!
  wait_ready "$OUT/serve_$cfg.log" $pid
  grep -E "ready|rror|captured|speculative" "$OUT/serve_$cfg.log" | head -4
  for conc in 1 8; do
    echo "== $cfg concurrency $conc"
    bench_random $port $conc 64 64
  done
  kill $pid; wait $pid 2>/dev/null
done
