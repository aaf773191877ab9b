#!/usr/bin/env bash
# Issue 6: the register routing (DSERVE_MOE_ROUTE_FAST, default) in the routing launch and in the opt-in fused
# router (DSERVE_MOE_GATE_ROUTE=1): the routing tests (both kernels), memcheck, then bench-one-batch V2-Lite bf16 at
# batch 1 / 8 default vs the fused router, alternating twice, and FP8 batch 1 the same once. Logs: $OUT/*.log.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=$B/ds_ops_cuda_gpu_test
F='MoeGroupedTest.RoutePermuteMatchesCpu:MoeGroupedTest.FusedGateRouteMatchesCpu'
timeout 60 "$T" --gtest_filter="$F" > "$OUT/tests.log" 2>&1
echo "== $F rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure| us" "$OUT/tests.log" | head -20
DSERVE_MOE_ROUTE_FAST=0 timeout 60 "$T" --gtest_filter="MoeGroupedTest.FusedGateRouteMatchesCpu" > "$OUT/tests_slow.log" 2>&1
echo "== FusedGateRoute with DSERVE_MOE_ROUTE_FAST=0 rc=$?"; grep -E "^\[  (PASSED|FAILED) | us" "$OUT/tests_slow.log" | head -4
timeout 100 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" --gtest_filter="$F" > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tail -1
G=DSERVE_MOE_GATE_ROUTE=1
AB_BATCHES=1,8 AB_CONFIGS="base $G base $G" bash "$(dirname "$0")/ab.sh"
AB_BATCHES=1 AB_EXTRA="--quantization fp8" AB_CONFIGS="base $G" bash "$(dirname "$0")/ab.sh"
