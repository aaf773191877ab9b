#!/usr/bin/env bash
# Why the weight-streaming decode kernels sit at 2.2-2.5 TB/s (issue 6, batch 1): ncu (clock control off, caches
# flushed between replays) on the small-M GEMM and MoE kernels inside bench-one-batch's NVTX "decode" ranges, eager,
# V2-Lite config, dummy bf16: duration, DRAM bytes and throughput, achieved vs theoretical occupancy, registers,
# shared memory, and the long-scoreboard / barrier / LG-throttle stall shares, per kernel name. NS_EXTRA adds
# bench flags (e.g. --quantization fp8); NS_TIMEOUT caps the ncu run (default 240 s). Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__grid_size,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct,lts__t_sector_hit_rate.pct
start=$(date +%s)
timeout ${NS_TIMEOUT:-240} "$NCU" --clock-control none --nvtx --nvtx-include "decode/" --kernel-name regex:"${NS_KERNELS:-small_m}" \
  --metrics "$M" --csv --launch-count ${NS_COUNT:-60} "$B/dserve" bench-one-batch --device cuda \
  --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size ${NS_BS:-1} \
  --input-len 256 --output-len 2 --disable-cuda-graph ${NS_EXTRA:-} > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
echo "== ncu rc=$? ($(( $(date +%s) - start )) s)"; tail -3 "$OUT/ncu.err"
python3 - "$OUT/ncu.csv" <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("no ncu rows"); sys.exit(0)
h = rows[0]
ki, mi, vi, gi = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("Grid Size")
per = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows[1:]:
    name = re.sub(r"^void |\(anonymous namespace\)::|ds::kernels::", "", r[ki]).split("(")[0][:48] + " grid " + r[gi]
    try:
        per[name][r[mi]].append(float(r[vi].replace(",", "")))
    except ValueError:
        pass
for name, ms in per.items():
    print(name)
    for m, v in ms.items():
        print(f"    {m:60s} {sum(v)/len(v):14.2f}  (x{len(v)})")
PY
