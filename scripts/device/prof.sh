#!/usr/bin/env bash
# Where a batch-1 decode step's time goes (issue 6): ncu (clock control off, one metric) over the kernels inside
# bench-one-batch's NVTX "decode" ranges, eager (no CUDA graph, same kernels), V2-Lite config, dummy bf16
# weights; then the kernel durations summed per kernel name vs the step's wall time. Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
start=$(date +%s)
timeout 240 "$NCU" --clock-control none --nvtx --nvtx-include "decode/" --metrics gpu__time_duration.sum --csv \
  --launch-count ${PROF_KERNELS:-3000} "$B/dserve" bench-one-batch --device cuda \
  --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size ${PROF_BS:-1} \
  --input-len 256 --output-len 2 ${PROF_EXTRA---disable-cuda-graph} > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
echo "== ncu rc=$? ($(( $(date +%s) - start )) s)"; tail -3 "$OUT/ncu.err"
python3 - "$OUT/ncu.csv" <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("no ncu rows"); sys.exit(0)
h = rows[0]
ki, vi, ui = h.index("Kernel Name"), h.index("Metric Value"), h.index("Metric Unit")
ids = h.index("ID")
tot = collections.Counter(); cnt = collections.Counter()
n = 0
for r in rows[1:]:
    try:
        v = float(r[vi].replace(",", ""))
    except ValueError:
        continue
    unit = r[ui]
    us = v / 1000.0 if unit in ("nsecond", "ns") else (v if unit in ("usecond", "us") else v * 1000.0)
    name = re.sub(r"^void |\(anonymous namespace\)::|ds::kernels::", "", r[ki]).split("(")[0][:70]
    tot[name] += us; cnt[name] += 1; n += 1
steps = 1  # output-len 2 -> 1 decode step
print(f"kernels {n} over {steps} decode steps: {n/steps:.0f} per step, sum {sum(tot.values())/steps:.1f} us per step")
for name, us in tot.most_common(40):
    print(f"{us/steps:9.1f} us/step  {cnt[name]/steps:6.0f} launches/step  {us/cnt[name]:7.2f} us avg  {name}")
PY
