#!/usr/bin/env bash
# Session 31 (~300 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = f6ba67c): the FP8 MoE walk's expert
# pointer tables copied to shared memory before its PDL wait (moe_fp8.cu). (1) The MoE and fixture GPU tests;
# (2) FP8 batch 1 / 8 prev vs new, two rounds alternating.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*Moe*:FixtureGpuTest.*:*Fp8Fixture*' SUITE_LIMIT=150 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=fp8 bash "$(dirname "$0")/abbin.sh"
