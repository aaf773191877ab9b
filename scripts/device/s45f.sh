#!/usr/bin/env bash
# Session 45, sixth call (~120 s; binaries dserve, ds_ops_cuda_gpu_test): the landed tree (the flag join for bf16 at
# <= 8 tokens by default): the whole GPU suite, then bench-one-batch bf16 / FP8 b1 / b8 once.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=1 AB_BINS="new" bash "$D/abbin.sh"
