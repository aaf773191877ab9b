#!/usr/bin/env bash
# Session 52: why the split-K wgmma FP8 GEMM is slow at 32-64 tokens (s52a: V2-Lite o_proj 2 blocks a CTA, 7.6 /
# 13.5 / 25.3 us at 16 / 32 / 64 token columns): ncu on one launch at M = 16 and at M = 64 (duration, warps, issued
# instructions, every stall reason per issued instruction), and the kernel's SASS (wgmma, barriers, loads).
set -u
source "$(dirname "$0")/lib.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__grid_size,launch__registers_per_thread,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,smsp__cycles_active.avg,sm__cycles_elapsed.max,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for m in 16 64; do
  start=$(date +%s)
  timeout 120 "$NCU" --clock-control none --kernel-name regex:fp8_gemm_wgmma --launch-skip 3 --launch-count 1 \
    --metrics "$M" --csv "$B/dserve_fp8_gemm_bench" --filter lite_o --ms $m > "$OUT/ncu_$m.csv" 2> "$OUT/ncu_$m.err"
  echo "== ncu M=$m rc=$? ($(( $(date +%s) - start )) s)"
  python3 - "$OUT/ncu_$m.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit("no rows")
h = rows[0]; mi, vi = h.index("Metric Name"), h.index("Metric Value")
for r in rows[1:]:
    try:
        v = float(r[vi].replace(",", ""))
    except ValueError:
        continue
    if "stalled" in r[mi] and v < 0.05: continue
    print(f"  {r[mi]:90s} {r[vi]}")
PY
done
CO=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null)
if [ -n "$CO" ]; then
  "$CO" -sass "$B/dserve_fp8_gemm_bench" 2>/dev/null | awk '/Function : .*fp8_gemm_wgmma_kernelILi64/{f=1;next} /Function :/{f=0} f' > "$OUT/k64.sass"
  echo "== sass lines $(wc -l < "$OUT/k64.sass")"
  grep -nE "HGMMA|WARPGROUP|SYNCS|LDG|BAR|UTMALDG|LDL|STL|MEMBAR|ATOM|BRA|WARPSYNC|DEPBAR" "$OUT/k64.sass" | head -150
fi
