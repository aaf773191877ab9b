#!/usr/bin/env bash
# Session 60, fourth call: where the indexer's select spends ~50 us at batch 1 x 32K (the scores take ~11): the kernel
# alone with warp-aggregated histograms (default) and with one shared atomic a key (DSERVE_INDEXER_SELECT_PLAIN=1),
# then ncu's warp states and hottest instructions of one select launch.
set -u
source "$(dirname "$0")/lib.sh"
for plain in 0 1 0 1; do
  echo "== select plain atomics $plain"
  DSERVE_INDEXER_SELECT_PLAIN=$plain timeout 60 $B/dserve_kernel_bench --filter indexer 2>&1 | grep -E "indexer"
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
timeout 150 "$NCU" --clock-control none --kernel-name regex:indexer_select --launch-count 1 \
  --section WarpStateStats --section SourceCounters --section SpeedOfLight --section LaunchStats --section Occupancy \
  "$B/dserve_kernel_bench" --filter 'indexer_topk v3.2 batch=1 context=32768' > "$OUT/ncu_select.txt" 2>&1
echo "== ncu rc=$?"
grep -vE "^==PROF==|^\s*$" "$OUT/ncu_select.txt" | grep -vE "^indexer_topk|^ceiling|^  indexer|^device|^done" | head -120
