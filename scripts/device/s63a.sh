#!/usr/bin/env bash
# Prepared in session 62 (no device time left) for the next session: (1) the indexer select's find_bucket fold
# (reverted in 7f04749 because it could not be run): re-apply it (`git revert 7f04749`), build, then this script runs
# the IndexerTopk cases on it; (2) ncu of the wgmma MLA prefill with its shift-mapped loads (370 TFLOP/s at V3 128 heads
# x 4,096, 0.47 of the bf16 ceiling) and of the indexer's wgmma scores (~275 TFLOP/s): what bounds them now.
# Binaries: ds_ops_cuda_gpu_test, dserve_kernel_bench (~200 s: all.sh s63a:240).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run indexer 90 '*IndexerTopk*'
ncu_run ncu_prefill 100 mla_prefill_wgmma 'mla_prefill v3 tokens=4096' '^mla_prefill|^  mla prefill' 150 \
  --section SourceCounters
ncu_run ncu_indexer 80 indexer_scores_wgmma 'indexer_prefill v3.2 batch=1 context=8192' '^indexer|^  indexer' 90
