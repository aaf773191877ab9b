#!/usr/bin/env bash
# Run record: the flag join's third form (the landed kernels) on by default everywhere up to 64 tokens in this call's binaries (the landed default is bf16 only, <= 8 tokens).
# Session 45, fourth call (~300 s; binaries dserve, ds_ops_cuda_gpu_test): the flag join's third form (the consumer
# takes the signal before its PDL wait, polling with a backoff to 256 ns; early-trigger norms let their dependents
# start once it is in): (1) the whole GPU suite; (2) bench-one-batch A/B two rounds bf16 / FP8 b1 / b8 / b32, flag
# join vs the event join (DSERVE_SIDE_FLAG_JOIN=0).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
AB_BATCHES=1,8,32 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new ev" AB_CFG_ev=DSERVE_SIDE_FLAG_JOIN=0 bash "$D/abbin.sh"
