#!/usr/bin/env bash
# Session 32 (~230 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = main 3c5b423): the FP8 MoE walk
# (moe_fp8_small_m_pipe_kernel) with its slot records copied to shared memory once and each tile's scales loaded a
# tile ahead (s32b: the FP8 walks stream at 2.0-2.6 TB/s; between two tiles' copies each CTA waited for a slot
# record read and, after the copies landed, for its scales). (1) The FP8 GPU tests (the walk bit for bit against
# the one-round kernel, settled or not; fixtures; graphs). (2) FP8 batch 1 / 8, prev vs new, two rounds.
# Measured as a tie (BENCHMARKS 'Session 32'), so the change was not kept: this script needs that build.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*Fp8*:*fp8*:CudaGraph*' SUITE_LIMIT=120 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=fp8 bash "$(dirname "$0")/abbin.sh"
