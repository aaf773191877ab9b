#!/usr/bin/env bash
# Prepared in session 36 for session 37's first call (~380 s; binaries dserve, ds_ops_cuda_gpu_test and
# libds_cupti_trace.so from main). The fused router + routing in one thread-block cluster (DSERVE_MOE_GATE_ROUTE=2,
# launch_moe_gate_route_cluster: CTA 0 routes from the logits in distributed shared memory after a cluster barrier;
# written without a device). s36h measured the one-CTA routing launch as the costliest latency link of the FP8
# batch-1 chain (~4.2 us a layer); the ticket version (=1) lost 6 us a layer in s30b, its last CTA's round trips
# queued behind the memory system (the lesson of s36d too). (1) Its kernel test (bit for bit the ticket kernel's
# logits, ids, weights, grouping; graph replay; times alone) and the op test with =1 and =2; (2) the fixture / graph
# tests with =2; (3) A/B, three rounds alternating, FP8 and bf16, batch 1 / 8: main vs =2 vs =1; (4) one layer's
# timeline at FP8 batch 1 under =2. Prediction: =2 -2 to -3 us a layer at batch 1 (~3-4%) if the cluster barrier and
# the DSMEM reads stay off the queues; a loss like =1's if the router part is the problem.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run gate_route_tests 150 'MoeGroupedTest.ClusterGateRoute*:MoeGroupedTest.FusedGateRoute*'
grep -E "GATEROUTE|moe_gate_route .* fused|Failure" "$OUT/gate_route_tests.log" | head -12
DSERVE_MOE_GATE_ROUTE=2 GTEST_FILTER='FixtureGpu*:Fp8Fixture*:CudaGraph*' SUITE_LIMIT=150 bash "$D/gpusuite.sh" | \
  grep -E "^==|FAILED|PASSED|!!"
AB_ROUNDS=3 AB_BINS="new gr2 gr1" AB_CFG_gr2=DSERVE_MOE_GATE_ROUTE=2 AB_CFG_gr1=DSERVE_MOE_GATE_ROUTE=1 \
  bash "$D/abbin.sh"
DSERVE_MOE_GATE_ROUTE=2 OUT=$OUT/trace_gr2 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
