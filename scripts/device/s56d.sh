#!/usr/bin/env bash
# Session 56's fourth call (binaries dserve, ds_ops_cuda_gpu_test; ~300 s): the routing and grouping in one launch
# up to 64 tokens (was 16; the 32-warp kernel past 16). (1) Its cases (RoutePermuteMatchesCpu, SharedExpertsFused*,
# MoE / fixture / graph cases), the route case under memcheck. (2) V2-Lite FP8 batch 32 / 64 and the V3-shaped 3-layer
# model at 32 / 64: two launches (the default) vs one (DSERVE_MOE_ROUTE_PERMUTE_MAX=64), rounds alternating.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run rp 200 'MoeGroupedTest.*:MoeFp8*:*Fixture*:CudaGraph*:FastKernelsTest.Moe*'
grep -E "^\[  FAILED" "$OUT/rp.log" | head
memcheck_run rp_mc 150 'MoeGroupedTest.RoutePermuteMatchesCpu'
AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="two one" AB_CFG_two=base AB_CFG_one=DSERVE_MOE_ROUTE_PERMUTE_MAX=64 \
  AB_ROUNDS=3 OUT=$OUT/lite bash "$D/abbin.sh"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="two one" AB_CFG_two=base \
  AB_CFG_one=DSERVE_MOE_ROUTE_PERMUTE_MAX=64 AB_ROUNDS=2 OUT=$OUT/v3 bash "$D/abbin.sh"
