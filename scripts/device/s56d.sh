#!/usr/bin/env bash
# Session 56's fourth call (binaries dserve, ds_ops_cuda_gpu_test; ~400 s): two opt-ins for the batch 17-64 decode's
# routing chain (router GEMM on cuBLASLt ~5.3 us, routing 2.4, grouping 4.6 in session 53's batch-64 trace). (1) Their
# cases: the routing and grouping in one launch up to 64 tokens (RoutePermuteMatchesCpu, SharedExpertsFused* at 17 /
# 40 / 64), the new router GEMM (GemmM64Test.*), with the MoE / fixture / graph cases; the two new launches under
# memcheck. (2) V2-Lite FP8 batch 24 / 48 / 64 and the V3-shaped 3-layer model at 32 / 64: default vs one launch
# (DSERVE_MOE_ROUTE_PERMUTE_MAX=64) vs the router GEMM (DSERVE_GEMM_M64=1) vs both, two rounds alternating.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run rp 200 'MoeGroupedTest.*:GemmM64Test.*:MoeFp8*:*Fixture*:CudaGraph*:FastKernelsTest.Moe*'
grep -E "^\[  FAILED" "$OUT/rp.log" | head
grep -E "gemm_m64" "$OUT/rp.log" | head -10
DSERVE_GEMM_M64=1 DSERVE_MOE_ROUTE_PERMUTE_MAX=64 gtest_run fix_on 150 '*Fixture*:CudaGraph*'
memcheck_run rp_mc 150 'MoeGroupedTest.RoutePermuteMatchesCpu:GemmM64Test.*'
AB_BATCHES=24,48,64 AB_KINDS="fp8" AB_BINS="base rp gm both" AB_CFG_base=base AB_CFG_rp=DSERVE_MOE_ROUTE_PERMUTE_MAX=64 \
  AB_CFG_gm=DSERVE_GEMM_M64=1 AB_CFG_both=DSERVE_MOE_ROUTE_PERMUTE_MAX=64,DSERVE_GEMM_M64=1 AB_ROUNDS=2 \
  OUT=$OUT/lite bash "$D/abbin.sh"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="base both" AB_CFG_base=base \
  AB_CFG_both=DSERVE_MOE_ROUTE_PERMUTE_MAX=64,DSERVE_GEMM_M64=1 AB_ROUNDS=2 OUT=$OUT/v3 bash "$D/abbin.sh"
