#!/usr/bin/env bash
# Session 31 (~320 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = f6ba67c): (1) the small-M / MoE GPU tests on
# the bf16 kernels' L2 prefetch of the weight rounds past the first (small_m_tile.cuh prefetch_past_first_round);
# (2) bf16 batch 1 / 8 prev vs new, two rounds alternating; (3) FP8 batch 1 / 8 prev, new and new with the FP8 MoE
# walk capped at one CTA an SM (DSERVE_MOE_FP8_PIPE_PER_SM=1: the shared expert's GEMMs fit beside it), two rounds.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*SmallM*:*Moe*:*Gemm*:FixtureGpuTest.*' SUITE_LIMIT=150 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
for round in 1 2; do
  for bin in prev new; do
    dir=$B; [ $bin = prev ] && dir=$B/prev
    echo "-- round $round: $bin bf16"
    DEVBIN=$dir AB_BATCHES=1,8 AB_CONFIGS=base OUT=$OUT/ab_${bin}_$round \
      bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
  done
done
for round in 1 2; do
  for bin in prev new cap; do
    dir=$B; [ $bin = prev ] && dir=$B/prev
    cfg=base; [ $bin = cap ] && cfg=DSERVE_MOE_FP8_PIPE_PER_SM=1
    echo "-- round $round: $bin fp8"
    DEVBIN=$dir AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS=$cfg OUT=$OUT/ab_${bin}_$round \
      bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
  done
done
