#!/usr/bin/env bash
# Session 48, sixth call (binaries dserve, libds_cupti_trace.so): does the bf16 graph's ~10 us start stall (sessions
# 46-47) grow with the number of side-stream forks? DSERVE_EXP_SIDE_FORKS=n (that call's binaries only): only the
# first n shared-expert sections of a forward fork onto the side stream (the rest run on the main stream before the
# routing). bf16 b1 traces for n = 0, 1, 4, 13 and the default (26), each: the replay's first kernels and its span.
# Run record: DSERVE_EXP_SIDE_FORKS existed only in this call's binaries.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for n in ${FORKS:-0 1 4 13 default}; do
  if [ "$n" = default ]; then unset DSERVE_EXP_SIDE_FORKS; else export DSERVE_EXP_SIDE_FORKS=$n; fi
  OUT=$OUT/trace_$n TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
done
unset DSERVE_EXP_SIDE_FORKS
for n in ${FORKS:-0 1 4 13 default}; do
  d=$OUT/trace_$n
  echo "== forks $n: $(grep -E '^Decode\.  median' "$d/b1b_bs1.log" | sed 's/.*throughput: //')"
  python3 - "$d/trace_bs1.csv" <<'PY'
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
