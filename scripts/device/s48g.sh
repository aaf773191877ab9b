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
  python3 scripts/device/replay_head.py "$OUT/trace_e$v/trace_bs1.csv" --replays 3 --short
done
for v in 4 0; do DSERVE_GRAPH_EDGE_EXP=$v b1b_run "bench_e$v" --output-len 32 --batch-size 1; done
