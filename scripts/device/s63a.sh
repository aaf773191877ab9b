#!/usr/bin/env bash
# Prepared in session 62 (no device time left) for the next session: (1) the indexer select's find_bucket fold
# (reverted in 7f04749 because it could not be run): re-apply it (`git revert 7f04749`), build, then this script runs
# the IndexerTopk cases on it; (2) ncu of the wgmma MLA prefill with its shift-mapped loads (370 TFLOP/s at V3 128 heads
# x 4,096, 0.47 of the bf16 ceiling) and of the indexer's wgmma scores (~275 TFLOP/s): what bounds them now.
# Binaries: ds_ops_cuda_gpu_test, dserve_kernel_bench (~200 s: all.sh s63a:240).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run indexer 90 '*IndexerTopk*'
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
timeout 100 "$NCU" --clock-control none --kernel-name regex:mla_prefill_wgmma --launch-count 1 $SECTIONS \
  --section SourceCounters "$B/dserve_kernel_bench" --filter 'mla_prefill v3 tokens=4096' > "$OUT/ncu_prefill.txt" 2>&1
echo "== ncu prefill rc=$?"
grep -vE "^==PROF==|^\s*$|^mla_prefill|^  mla prefill|^ceiling|^device|^done|^    ---" "$OUT/ncu_prefill.txt" | head -150
timeout 80 "$NCU" --clock-control none --kernel-name regex:indexer_scores_wgmma --launch-count 1 $SECTIONS \
  "$B/dserve_kernel_bench" --filter 'indexer_prefill v3.2 batch=1 context=8192' > "$OUT/ncu_indexer.txt" 2>&1
echo "== ncu indexer rc=$?"
grep -vE "^==PROF==|^\s*$|^indexer|^  indexer|^ceiling|^device|^done|^    ---" "$OUT/ncu_indexer.txt" | head -90
