#!/usr/bin/env bash
# Session 48, seventh call (binaries dserve, libds_cupti_trace.so): s48f found the bf16 graph's ~10 us start stall the
# same with 1 side-stream fork as with 26 (and gone with none). Session 47's edge re-typing (DSERVE_GRAPH_EDGE_EXP,
# re-applied for this call only) never ran mode 4 (every fork and join edge a full dependency: with the flag join the
# first fork's edge is no join, and the final join no fork, so modes 1 and 3 each left one cross-stream edge
# programmatic). bf16 b1 traces with modes 0 and 4, then bench-one-batch b1 with each, once.
# Run record: DSERVE_GRAPH_EDGE_EXP and DSERVE_EXP_SIDE_FORKS existed only in this call's binaries.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for v in 4 0; do
  DSERVE_GRAPH_EDGE_EXP=$v OUT=$OUT/trace_e$v TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
  echo "== e$v: $(grep -h 'EDGE_EXP' "$OUT/trace_e$v/b1b_bs1.log" | head -1 | sed 's/.*INFO] //')"
  python3 - "$OUT/trace_e$v/trace_bs1.csv" <<'PY'
import csv, collections, sys
rows = list(csv.DictReader(open(sys.argv[1])))
c = collections.Counter(r["correlation"] for r in rows if r["graph_id"] != "0")
mx = max(c.values())
for last in sorted(k for k, v in c.items() if v == mx)[-3:]:
    st = sorted((r for r in rows if r["correlation"] == last), key=lambda r: int(r["start_ns"]))
    b = int(st[0]["start_ns"])
    print("  first end %.2f, second start %.2f, span %.1f us, %d kernels" % ((int(st[0]["end_ns"]) - b) / 1e3,
          (int(st[1]["start_ns"]) - b) / 1e3, (max(int(r["end_ns"]) for r in st) - b) / 1e3, len(st)))
PY
done
for v in 4 0; do
  DSERVE_GRAPH_EDGE_EXP=$v timeout 90 "$B/dserve" bench-one-batch --device cuda --model-path \
    tests/data/configs/deepseek-v2-lite.json --load-format dummy --input-len 256 --output-len 32 --batch-size 1 \
    > "$OUT/bench_e$v.log" 2>&1
  echo "== bench e$v: $(grep -E 'Decode\.  median' "$OUT/bench_e$v.log")"
done
