#!/usr/bin/env bash
# Session 48, fifth call (binaries dserve, ds_ops_cuda_gpu_test): the landed order (graphs instantiated after every
# capture, smallest first): the whole GPU suite, then bench-one-batch bf16 / FP8 at `--batch-size 1,8`, three rounds
# alternating against DSERVE_GRAPH_INSTANTIATE_EACH=1 (the old order).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=3 AB_BINS="new each" AB_CFG_each=DSERVE_GRAPH_INSTANTIATE_EACH=1 \
  bash "$D/abbin.sh"
