#!/usr/bin/env bash
# Session 31 (~320 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = f6ba67c): (1) the small-M / MoE GPU tests on
# the bf16 kernels' L2 prefetch of the weight rounds past the first (small_m_tile.cuh prefetch_past_first_round);
# (2) bf16 batch 1 / 8 prev vs new, two rounds alternating; (3) FP8 batch 1 / 8 prev, new and new with the FP8 MoE
# walk capped at one CTA an SM (DSERVE_MOE_FP8_PIPE_PER_SM=1: the shared expert's GEMMs fit beside it), two rounds.
# The record of that run: both lost (BENCHMARKS Session 31) and neither the prefetch nor the switch was kept.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*SmallM*:*Moe*:*Gemm*:FixtureGpuTest.*' SUITE_LIMIT=150 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=bf16 bash "$(dirname "$0")/abbin.sh"
AB_KINDS=fp8 AB_BINS="prev new cap" AB_CFG_cap=DSERVE_MOE_FP8_PIPE_PER_SM=1 bash "$(dirname "$0")/abbin.sh"
