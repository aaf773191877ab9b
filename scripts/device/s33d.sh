#!/usr/bin/env bash
# Session 33 (~300 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = main 21e6e56; its build had the walk
# without the stop at the first empty slot record that main has): the bf16 small-M MoE
# kernel as a two-stage walk of resident CTAs (DSERVE_MOE_SMALL_WALK=1: the routed down, 2: gate|up too; s32b: the
# routed down's 1,536 one-round CTAs stream 3.3 TB/s in the chain, ~4 an SM turning over in waves). (1) The walk
# bit for bit against the one-round kernel (MOEWALK timing lines) and the bf16 MoE GPU tests; then the MoE op and
# fixture tests with the walk on everywhere (=2). (2) bf16 batch 1 / 8: prev, new (walk off), wd (=1), wa (=2).
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='MoeGemmGpu.*:MoeGrouped*:CudaGraph*' SUITE_LIMIT=120 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
grep -rh "MOEWALK" "$OUT" 2>/dev/null | sort | uniq | head -40
mkdir -p "$OUT/walk2"
DSERVE_MOE_SMALL_WALK=2 OUT=$OUT/walk2 GTEST_FILTER='MoeGrouped*:*Fixture*:CudaGraph*' SUITE_LIMIT=150 \
  bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=bf16 AB_BINS="prev new wd wa" AB_CFG_wd=DSERVE_MOE_SMALL_WALK=1 AB_CFG_wa=DSERVE_MOE_SMALL_WALK=2 \
  bash "$(dirname "$0")/abbin.sh"
