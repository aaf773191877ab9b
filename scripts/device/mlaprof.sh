#!/usr/bin/env bash
# Where the MLA decode kernel's time goes at few heads (issue 6): dserve_mla_bench on MLA_PROF_CASES (default
# 1 x 32K and 1 x 4K at 16 heads) under the CUPTI tracer, once per kernel choice (DSERVE_MLA_M16=0 / 1, and without PDL so
# kernel spans do not include waiting; MLA_PROF_MODES: comma-joined env settings per mode), then the time per kernel name (decode kernel vs combine). Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
for mode in ${MLA_PROF_MODES:-DSERVE_MLA_M16=0 DSERVE_MLA_M16=1 DSERVE_MLA_M16=0,DSERVE_PDL=0}; do
  tag=${mode//[^A-Za-z0-9]/_}
  env ${mode//,/ } MLA_BENCH_CASES=${MLA_PROF_CASES:-45} timeout 120 "$B/dserve_mla_bench" "$OUT/mla_$tag.csv" > "$OUT/mla_$tag.log" 2>&1
  echo "== $mode untraced rc=$?"; grep -E "^mla_decode|alt splits|cp.async" "$OUT/mla_$tag.log"
  env ${mode//,/ } MLA_BENCH_CASES=${MLA_PROF_CASES:-45} DSERVE_TRACE_OUT="$OUT/trace_$tag.csv" \
    LD_PRELOAD="$PWD/$B/libds_cupti_trace.so" timeout 120 "$B/dserve_mla_bench" "$OUT/mlat_$tag.csv" > "$OUT/mlat_$tag.log" 2>&1
  echo "== $mode traced rc=$?"
  python3 - "$OUT/trace_$tag.csv" <<'PY'
import csv, sys, collections, re, statistics
rows = list(csv.DictReader(open(sys.argv[1])))
per = collections.defaultdict(list)
for r in rows:
    if int(r["graph_id"]) == 0: continue
    n = re.sub(r"^_Z\w*?(mla_\w+?kernel)\w*$", r"\1", r["name"])
    per[(n, r["grid"])].append((int(r["end_ns"]) - int(r["start_ns"])) / 1e3)
for (n, g), d in sorted(per.items()):
    print(f"  {n[:60]:60s} grid {g:>10s} x{len(d):5d} median {statistics.median(d):8.2f} us  min {min(d):8.2f}")
PY
done
