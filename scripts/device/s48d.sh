#!/usr/bin/env bash
# Run record: DSERVE_GRAPH_EXP_ASC / _FRESH / _LATE existed only in session 48's binaries; _LATE is now the default order (DSERVE_GRAPH_INSTANTIATE_EACH=1: the old one).
# Session 48, fourth call (binaries dserve, libds_cupti_trace.so): s48c found that it is the instantiation order
# (DSERVE_GRAPH_EXP_LATE=1: capture largest first, instantiate smallest first: b1 as fast as alone). Is it the
# hardware queues a graph's streams land on? bf16 b1 alone / max-bs 8 under CUDA_DEVICE_MAX_CONNECTIONS=32 and =1,
# two rounds; the 1,8 list with LATE; then b1 traces with 32 connections (the graph's start stall of session 46).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
bench() {  # NAME ARGS...
  local name=$1; shift
  timeout 90 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --input-len 256 --output-len 32 "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Decode\.  median' "$OUT/$name.log" | sed 's/.*throughput: //' | tr '\n' ' ')$(grep -ho 'for [0-9]* batch sizes' "$OUT/$name.log")"
}
for round in 1 2; do
  bench "alone_$round" --batch-size 1
  bench "maxbs8_$round" --batch-size 1 --cuda-graph-max-bs 8
  CUDA_DEVICE_MAX_CONNECTIONS=32 bench "c32_alone_$round" --batch-size 1
  CUDA_DEVICE_MAX_CONNECTIONS=32 bench "c32_maxbs8_$round" --batch-size 1 --cuda-graph-max-bs 8
  CUDA_DEVICE_MAX_CONNECTIONS=1 bench "c1_maxbs8_$round" --batch-size 1 --cuda-graph-max-bs 8
  bench "list18_$round" --batch-size 1,8
  DSERVE_GRAPH_EXP_LATE=1 bench "late_list18_$round" --batch-size 1,8
done
CUDA_DEVICE_MAX_CONNECTIONS=32 OUT=$OUT/trace_c32 TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
for d in "$OUT"/trace_*; do
  echo "== $(basename "$d"): first kernels of the last graph replay (start, end us)"
  python3 - "$d/trace_bs1.csv" <<'PY'
import csv, collections, sys
rows = list(csv.DictReader(open(sys.argv[1])))
c = collections.Counter(r["correlation"] for r in rows if r["graph_id"] != "0")
mx = max(c.values())
for last in sorted(k for k, v in c.items() if v == mx)[-2:]:
    st = sorted((r for r in rows if r["correlation"] == last), key=lambda r: int(r["start_ns"]))
    b = int(st[0]["start_ns"])
    for r in st[:3]:
        print("  %8.2f %8.2f %s" % ((int(r["start_ns"]) - b) / 1e3, (int(r["end_ns"]) - b) / 1e3, r["name"][:70]))
    print("  span %.1f us" % ((max(int(r["end_ns"]) for r in st) - b) / 1e3))
PY
done
