#!/usr/bin/env bash
# Session 37, seventh call (~330 s; binaries dserve, ds_ops_cuda_gpu_test from the working tree, prev/dserve = main
# 4f8e4f8): decode weight streams loaded with an L2 evict-first hint (ptx::cp_async16_weight: the bf16 / FP8 small-M
# GEMMs, the MoE small-M kernels and walks, the router rows), so the activations, residual stream and metadata that
# the latency-bound kernels read back stay in the 60 MB L2 between ~146 MB of weights a layer. (1) whole GPU suite;
# (2) A/B prev vs new, FP8 and bf16, batch 1 / 8, three rounds; (3) DeepSeek-V3-shaped FP8 (5 layers) batch 1 / 8,
# one round each. Prediction: -0.5 to -2 us a layer at batch 1 if the chain's reads were missing the L2; nothing if not.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_ROUNDS=3 AB_BINS="prev new" bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BATCHES=1,8 AB_BINS="prev new" bash "$D/abbin.sh"
