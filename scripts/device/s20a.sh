#!/usr/bin/env bash
# Session 20's first call: the whole GPU suite on main be4d57b (+ the graph-timing switch; verifies session 19's four
# commits not run on a GPU), bench-one-batch batch 1 / 8 with and without DSERVE_GRAPH_TIMING=1 (the CUDA graph's
# device time against the whole step), and ncu on the transposed MLA decode kernel at batch 1 x 32K (16 heads).
set -u
source "$(dirname "$0")/lib.sh"
printf '#!/bin/sh\nDSERVE_GRAPH_TIMING=1 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_timed"
chmod +x "$B/dserve_timed"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,8 AB_REPS=2 AB_BINS="dserve dserve_timed" bash "$(dirname "$0")/abbin.sh"
grep -h "CUDA graph replays" "$OUT"/abbin_dserve_timed_r*.log
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
MLA_BENCH_SHAPES=1x32768x16 timeout 60 "$B/dserve_mla_bench" "$OUT/mla.csv" 2>&1 | grep -E "^mla|copy" | head
MLA_BENCH_SHAPES=1x32768x16 timeout 150 "$NCU" --clock-control none --kernel-name regex:"mla_decode_t16|mla_combine" \
  --launch-count 2 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section LaunchStats --section Occupancy "$B/dserve_mla_bench" "$OUT/mla_ncu.csv" > "$OUT/ncu.txt" 2>&1
echo "== ncu rc=$?"
grep -E "mla_|Duration|DRAM Throughput|Memory Throughput|Stall|stall|Warp Cycles|Issued|L2 Hit|Mem Busy|Max Bandwidth|Elapsed Cycles|SM Frequency|DRAM Frequency" "$OUT/ncu.txt" | head -80
