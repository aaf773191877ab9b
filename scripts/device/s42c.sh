#!/usr/bin/env bash
# Session 42, third call: the kQx walk rewritten after s42b (alone 23.1 us vs 6.9 for the e4m3 walk at one row an
# expert, V2-Lite down: ~2.5 us a quantization round, each round waiting for its own loads under the weight stream):
# now only the expert's rows, four rounds' loads in flight together. (1) its tests + timing lines (WALKQX) and
# memcheck; (2) A/B two rounds FP8 V2-Lite b1 / b4 / b8 / b16 and V3-shaped 5 layers b1 / b8, default vs wq;
# (3) ncu (full set) on the e4m3 walk and the kQx walk at v2-lite down rows 1 (per-instruction SASS table kept).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run walkqx 150 'MoeFp8Test.WgmmaWalkQuantizesItsInput:MoeFp8Test.WalkQuantThroughTheOps'
grep -E "WALKQX|Failure" "$OUT/walkqx.log" | head -30
memcheck_run walkqx_memcheck 150 'MoeFp8Test.WgmmaWalkQuantizesItsInput'
AB_BATCHES=1,4,8,16 AB_KINDS=fp8 AB_ROUNDS=2 AB_BINS="new wq" AB_CFG_wq=DSERVE_MOE_FP8_WALK_QUANT=1 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_BATCHES=1,8 AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new wq" \
  AB_CFG_wq=DSERVE_MOE_FP8_WALK_QUANT=1 bash "$D/abbin.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
DSERVE_TEST_NO_TIMING=1 timeout 150 "$NCU" --clock-control none --set full -k regex:moe_wgmma_walk -c 2 \
  -o "$OUT/walk" -f "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.WgmmaWalkQuantizesItsInput' \
  > "$OUT/ncu_run.log" 2>&1
echo "== ncu rc=$?"; tail -3 "$OUT/ncu_run.log"
"$NCU" -i "$OUT/walk.ncu-rep" --print-details all > "$OUT/details.txt" 2>&1
grep -E "moe_wgmma_walk|Duration|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Memory Throughput" \
  "$OUT/details.txt" | head -40
"$NCU" -i "$OUT/walk.ncu-rep" --page source --print-source sass --csv > "$OUT/sass.csv" 2>&1
echo "== sass.csv $(wc -l < "$OUT/sass.csv") lines"
xz -9 "$OUT/sass.csv"
rm -f "$OUT/walk.ncu-rep"
