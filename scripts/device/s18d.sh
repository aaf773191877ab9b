#!/usr/bin/env bash
# Session 18's fourth call (wip/s18b: the combine's ids and the down GEMM's slot before the PDL wait): the whole GPU
# suite, memcheck on the MoE tests (4 shards), then bench-one-batch batch 1 / 8 / 64 / 256 alternating main's
# binary after the session-18 merge (dserve_s18) with wip/s18b's (dserve), and FP8 batch 1 / 64 once each.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 MEMCHECK_LIMIT=170 \
  GTEST_FILTER='MoeGroupedTest.RoutePermuteMatchesCpu:MoeGroupedTest.CapturedInGraph:FastKernelsTest.Moe*' \
  bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,8,64,256 AB_BINS="dserve_s18 dserve" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,64 AB_REPS=1 AB_BINS="dserve_s18 dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
