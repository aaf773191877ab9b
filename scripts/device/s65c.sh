#!/usr/bin/env bash
# Session 65: where the TMA-producer kernels wait, instruction by instruction: ncu's warp-state sampling
# (SourceCounters)
# of the MHA prefill (V3 128 heads x 4,096, first mla_prefill_tma_kernel launch) and of the indexer scores (V3.2 8K),
# each report printed as a per-SASS-instruction CSV (stall samples by reason) for reading after the call.
# Binaries: dserve_kernel_bench (~90 s).
set -u
source "$(dirname "$0")/lib.sh"
ncu_source_page mha mla_prefill_tma_kernel "$B/dserve_kernel_bench" --filter 'mla_prefill v3 tokens=4096'
ncu_source_page idx indexer_scores_tma "$B/dserve_kernel_bench" --filter 'indexer_prefill v3.2 batch=1 context=8192'
