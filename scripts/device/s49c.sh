#!/usr/bin/env bash
# Session 49, third call (binaries dserve, libds_cupti_trace.so): s49b showed the bf16 b1 graph's second node starting
# ~12.1 us after the first node's start whatever the first node is (an experiment head spin of 0 / 6 / 12 us: the span
# unchanged). Does that setup overlap work queued before the graph on the stream? An experiment spin kernel outside
# the graph, just before each replay's launch (DSERVE_EXP_PRE_SPIN_NS 0 / 15 us): if the first node -> second node
# gap shrinks to ~1.5 us, a graph split into a single-stream head and the rest could hide it.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
export DSERVE_TRACE_LATENCY=1
for ns in 0 15000; do
  DSERVE_EXP_PRE_SPIN_NS=$ns OUT=$OUT/trace_$ns TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
  echo "== pre spin $ns ns: $(grep -E '^Decode\.  median' "$OUT/trace_$ns/b1b_bs1.log" | tr '\n' ' ')"
  python3 scripts/device/replay_head.py "$OUT/trace_$ns/trace_bs1.csv" --replays 3 --kernels 3
  python3 - "$OUT/trace_$ns/trace_bs1.csv" <<'PY'
import csv, sys
rows = sorted(csv.DictReader(open(sys.argv[1])), key=lambda r: int(r["start_ns"]))
spins = [r for r in rows if "probe_first" in r["name"]]
for sp in spins[-3:]:
    e = int(sp["end_ns"])
    nxt = [r for r in rows if int(r["start_ns"]) >= int(sp["start_ns"]) and r is not sp][:3]
    print("  spin %.2f us; then: %s" % ((e - int(sp["start_ns"])) / 1e3,
          ", ".join("%s start %+.2f end %+.2f q %s s %s" % (r["name"][-40:], (int(r["start_ns"]) - e) / 1e3, (int(r["end_ns"]) - e) / 1e3,
          "%+.2f" % ((int(r["queued_ns"]) - e) / 1e3) if int(r["queued_ns"] or 0) else "-",
          "%+.2f" % ((int(r["submitted_ns"]) - e) / 1e3) if int(r["submitted_ns"] or 0) else "-") for r in nxt)))
PY
done
