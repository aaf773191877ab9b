#!/usr/bin/env bash
# Session 61, seventh call: ncu on this session's two prefill kernels, for the next session's work on them: the wgmma
# MLA prefill (V3 128 heads x 4,096 tokens, 128-key tiles, ~185 TFLOP/s) and the indexer's multi-token scores
# (8,192 rows over 8,192 keys, ~247 TFLOP/s): speed of light, pipes, memory, warp states, hottest stalls.
set -u
source "$(dirname "$0")/lib.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
timeout 100 "$NCU" --clock-control none --kernel-name regex:mla_prefill_wgmma --launch-count 1 $SECTIONS \
  --section SourceCounters "$B/dserve_kernel_bench" --filter 'mla_prefill v3 tokens=4096' > "$OUT/ncu_prefill.txt" 2>&1
echo "== ncu prefill rc=$?"
grep -vE "^==PROF==|^\s*$|^mla_prefill|^  mla prefill|^ceiling|^device|^done|^    ---" "$OUT/ncu_prefill.txt" | head -150
timeout 80 "$NCU" --clock-control none --kernel-name regex:indexer_scores_mt --launch-count 1 $SECTIONS \
  "$B/dserve_kernel_bench" --filter 'indexer_prefill v3.2 batch=1 context=8192' > "$OUT/ncu_indexer.txt" 2>&1
echo "== ncu indexer rc=$?"
grep -vE "^==PROF==|^\s*$|^indexer|^  indexer|^ceiling|^device|^done|^    ---" "$OUT/ncu_indexer.txt" | head -90
