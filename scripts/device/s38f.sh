#!/usr/bin/env bash
# Session 38, spare device time (~60 s; binary ds_ops_cuda_gpu_test from main): where the FP8 gate|up walk's
# instructions go (s38e: 4.6 M warp instructions for 34.6 MB, ten times the read probe's per byte): ncu's
# instruction mix (InstructionStats: executed instructions per SASS opcode) and the hot instructions (SourceCounters:
# top stall and executed-instruction locations) on one launch alone, V2-Lite gate|up at one row, and the down walk.
set -u
source "$(dirname "$0")/lib.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
for k in 'pipe_kernel<.bool.1, .int.1>' 'pipe_kernel<.bool.0, .int.2>'; do
  tag=$(echo "$k" | tr -c 'a-z' '_')
  DSERVE_TEST_NO_TIMING=1 timeout 120 "$NCU" --clock-control none --kernel-name-base demangled \
    --kernel-name "regex:${k}" --launch-count 1 --section InstructionStats --section SourceCounters \
    --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum --print-metric-instances details \
    --print-details all "$B/ds_ops_cuda_gpu_test" --gtest_filter=MoeFp8Test.SmallMColumnTilesAgree \
    > "$OUT/ncu_$tag.txt" 2> "$OUT/ncu_$tag.err"
  echo "== ncu $k rc=$?"
  grep -E "sass__inst_executed_per_opcode|smsp__inst_executed.sum" "$OUT/ncu_$tag.txt" | cut -c1-1500 | head -4
  tail -c 600 "$OUT/ncu_$tag.err"
done
