#!/usr/bin/env bash
# Run record: kernels::pdl_fork / DSERVE_SIDE_PDL (first form) was in this call's binaries only, measured, and not landed (BENCHMARKS.md, Session 44).
# Session 44, second call (~250 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): the side stream's
# first kernel after a fork on a programmatic edge from the main stream's last kernel (DSERVE_SIDE_PDL=1,
# kernels::pdl_fork; graphs only). (1) Pdl.* (the new ForkedSideKernelStartsEarlyInAGraph), then the graph and fixture
# tests with the switch on; (2) A/B three rounds bf16 / FP8 V2-Lite b1 / b8; (3) a bf16 b1 trace with it (CSV kept):
# does the shared gate|up start before the norm ends, and end sooner?
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run pdl 60 'Pdl.*'
grep -E "PDLFORK|Failure|FAILED" "$OUT/pdl.log" | head -20
export DSERVE_SIDE_PDL=1
gtest_run graph_sp 200 '*CudaGraph*:*FixtureGpuTest*:*Fp8Fixture*'
grep -E "Failure|FAILED|programmatic" "$OUT/graph_sp.log" | head -20
unset DSERVE_SIDE_PDL
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=3 AB_BINS="new sp" AB_CFG_sp=DSERVE_SIDE_PDL=1 bash "$D/abbin.sh"
grep -h "programmatic" $OUT/ab_new_1/*.log $OUT/ab_sp_1/*.log 2>/dev/null | head -8
export DSERVE_SIDE_PDL=1
OUT=$OUT/trace_sp TRACE_BS="1" TRACE_EXTRA="" TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" > "$OUT/trace_sp.txt" 2>&1
xz -9 "$OUT/trace_sp/trace_bs1.csv"
