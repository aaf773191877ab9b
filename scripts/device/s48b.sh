#!/usr/bin/env bash
# Run record: DSERVE_GRAPH_EXP_ASC / _FRESH / _LATE existed only in session 48's binaries; _LATE is now the default order (DSERVE_GRAPH_INSTANTIATE_EACH=1: the old one).
# Session 48, second call (binaries dserve, libds_cupti_trace.so): s48a found that capturing graphs 2/4/8 beside 1
# costs batch 1 ~1% of device time (not the cache's size). bf16 b1, input 256, output 32, two rounds alternating:
# `1` alone; `1 --cuda-graph-max-bs 8`; the same with the graphs captured smallest first (DSERVE_GRAPH_EXP_ASC=1) and
# with a fresh graph region per graph (DSERVE_GRAPH_EXP_FRESH=1). Then traces of b1 alone and with max-bs 8.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
bench() {  # NAME ARGS...
  local name=$1; shift
  timeout 90 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --input-len 256 --output-len 32 "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Decode\.  median' "$OUT/$name.log" | sed 's/.*throughput: //' | tr '\n' ' ')$(grep -ho 'for [0-9]* batch sizes.*arena [0-9]* MiB' "$OUT/$name.log")"
}
for round in 1 2; do
  bench "alone_$round" --batch-size 1
  bench "maxbs8_$round" --batch-size 1 --cuda-graph-max-bs 8
  DSERVE_GRAPH_EXP_ASC=1 bench "asc_$round" --batch-size 1 --cuda-graph-max-bs 8
  DSERVE_GRAPH_EXP_FRESH=1 bench "fresh_$round" --batch-size 1 --cuda-graph-max-bs 8
done
OUT=$OUT/trace_alone TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
OUT=$OUT/trace_maxbs8 TRACE_BS=1 TRACE_EXTRA="--cuda-graph-max-bs 8" bash "$D/trace.sh" > /dev/null
for d in "$OUT"/trace_*; do
  echo "== $(basename "$d")"; grep -E "^Decode\.  median" "$d/b1b_bs1.log"; head -40 "$d/summary_bs1.txt"
done
