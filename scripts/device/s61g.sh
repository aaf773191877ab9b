#!/usr/bin/env bash
# Session 61, seventh call: ncu on this session's two prefill kernels, for the next session's work on them: the wgmma
# MLA prefill (V3 128 heads x 4,096 tokens, 128-key tiles, ~185 TFLOP/s) and the indexer's multi-token scores
# (8,192 rows over 8,192 keys, ~247 TFLOP/s): speed of light, pipes, memory, warp states, hottest stalls.
set -u
source "$(dirname "$0")/lib.sh"
ncu_run ncu_prefill 100 mla_prefill_wgmma 'mla_prefill v3 tokens=4096' '^mla_prefill|^  mla prefill' 150 \
  --section SourceCounters
ncu_run ncu_indexer 80 indexer_scores_mt 'indexer_prefill v3.2 batch=1 context=8192' '^indexer|^  indexer' 90
