#!/usr/bin/env bash
# Session 31 (~260 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = 2b202cf): the bf16 small-M kernel with
# rounds of 8 chunks a warp for grids of at most one CTA an SM (the MoE router: its whole K staged before the PDL
# wait). (1) The small-M / GEMM GPU tests; (2) FP8 and bf16 batch 1 / 8 prev vs new, two rounds alternating.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*SmallM*:*Gemm*' SUITE_LIMIT=100 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
bash "$(dirname "$0")/abbin.sh"
