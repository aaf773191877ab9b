#!/usr/bin/env bash
# Session 38, last call (~380 s; binaries dserve, ds_ops_cuda_gpu_test, dserve_kernel_bench from main = d78dc9d's
# code): (1) why the MoE walks stream below the read floor (s38b-d: neither the shared expert's bytes, nor the scale
# round trips, nor a third stage were it): ncu on one launch alone of the FP8 gate|up walk (MoeFp8Test's V2-Lite, one
# row), the bf16 routed gate|up (bench-one-batch eager, batch 1) and the read probe of the same bytes (dserve_kernel_bench
# weight_read, 34.6 MB): duration, DRAM bytes / throughput, L2 hit rate, warps active, issued instructions, and every
# warp-stall reason per issued instruction, side by side; (2) the arena's L2 window (DSERVE_L2_PERSIST_ARENA=1) again,
# three rounds FP8 and bf16 b1 / b8, and the V3-shaped FP8 model: it becomes the default only if it wins everywhere.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__grid_size,launch__registers_per_thread,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,smsp__inst_executed_op_ldgsts.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
start=$(date +%s)
DSERVE_TEST_NO_TIMING=1 timeout 120 "$NCU" --clock-control none --kernel-name regex:moe_fp8_small_m_pipe_kernel \
  --launch-count 1 --metrics "$M" --csv "$B/ds_ops_cuda_gpu_test" --gtest_filter=MoeFp8Test.SmallMColumnTilesAgree \
  > "$OUT/ncu_walk.csv" 2> "$OUT/ncu_walk.err"
echo "== ncu walk rc=$? ($(( $(date +%s) - start )) s)"
start=$(date +%s)
timeout 100 "$NCU" --clock-control none --kernel-name regex:read_probe --launch-count 1 --metrics "$M" --csv \
  "$B/dserve_kernel_bench" --filter 'v2-lite routed_down top6' > "$OUT/ncu_probe.csv" 2> "$OUT/ncu_probe.err"
echo "== ncu probe rc=$? ($(( $(date +%s) - start )) s)"
start=$(date +%s)
timeout 120 "$NCU" --clock-control none --nvtx --nvtx-include "decode/" --kernel-name regex:moe_small_m_kernel \
  --launch-count 1 --metrics "$M" --csv "$B/dserve" bench-one-batch --device cuda --model-path \
  tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 1 --input-len 256 --output-len 2 \
  --disable-cuda-graph > "$OUT/ncu_bf16.csv" 2> "$OUT/ncu_bf16.err"
echo "== ncu bf16 gate|up rc=$? ($(( $(date +%s) - start )) s)"
python3 - "$OUT/ncu_walk.csv" "$OUT/ncu_probe.csv" "$OUT/ncu_bf16.csv" <<'PY'
import csv, sys, re
cols = []
for path in sys.argv[1:]:
    vals, name = {}, path
    try:
        rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    except OSError:
        rows = []
    if rows:
        h = rows[0]
        ki, mi, vi = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
        for r in rows[1:]:
            name = re.sub(r"^void |\(anonymous namespace\)::|ds::kernels::", "", r[ki]).split("(")[0][:40]
            vals[r[mi]] = r[vi]
    cols.append((name, vals))
keys = sorted({k for _, v in cols for k in v})
print(f"{'metric':70s}" + "".join(f"{n[:26]:>28s}" for n, _ in cols))
for k in keys:
    vs = [v.get(k, "-") for _, v in cols]
    try:
        if "stalled" in k and max(float(x.replace(",", "")) for x in vs if x != "-") < 0.05:
            continue
    except ValueError:
        pass
    short = k.replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", "")
    print(f"{short:70s}" + "".join(f"{x:>28s}" for x in vs))
PY
AB_ROUNDS=3 AB_BINS="new l2" AB_CFG_l2=DSERVE_L2_PERSIST_ARENA=1 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BATCHES=1,8 AB_BINS="l2 new" \
  AB_CFG_l2=DSERVE_L2_PERSIST_ARENA=1 bash "$D/abbin.sh"
