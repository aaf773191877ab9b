#!/usr/bin/env bash
# Session 65: the indexer's wgmma scores with a TMA producer warp (DSERVE_INDEXER_TMA=1, branch s65-indexer-tma): its
# consistency modes and memcheck, the kernel bench against main's binary (the body refactor reschedules the default
# kernel: does it move?), V3.2 4 layers prefill A/B (TMA / default / main's binary); then the stall reasons of the TMA
# MHA prefill (the next lead there). Binaries: the branch's in $B, main's dserve / dserve_kernel_bench in $B/main.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run idx 150 '*IndexerTopk*'
grep -E "tma" "$OUT/idx.log" | head -4
memcheck_run idx_mc 100 '*IndexerTopk*'
kbench_ab kbench indexer_prefill "^indexer_prefill|indexer scores alone"
v32_config "$OUT/v32.json" 4
for round in 1 2; do
  prefill_run v32_32k_tma$round "$OUT/v32.json" 32768 DSERVE_INDEXER_TMA=1
  prefill_run v32_32k_def$round "$OUT/v32.json" 32768
  B=$B/main prefill_run v32_32k_main$round "$OUT/v32.json" 32768
done
prefill_run v32_12k_tma "$OUT/v32.json" 12288 DSERVE_INDEXER_TMA=1
prefill_run v32_12k_def "$OUT/v32.json" 12288
ncu_stalls ncu_indexer_tma 90 indexer_scores_tma 'indexer_prefill v3.2 batch=1 context=8192'
ncu_stalls ncu_mha_tma 120 mla_prefill_tma_kernel 'mla_prefill v3 tokens=4096'
