#!/usr/bin/env bash
# Run record: kernels::pdl_fork / DSERVE_SIDE_PDL (second form) was in this call's binaries only, measured, and not landed (BENCHMARKS.md, Session 44).
# Session 44, third call (~250 s): s44b again after its fix: in s44b the fork never applied inside the model's
# captures (the programmatic edge counts unchanged; the side stream there already held a node of its own, which the
# launch then followed); kernels::pdl_take_fork now sets the fork's nodes alone. Pdl.ForkedSideKernelStartsEarlyInAGraph
# now forks twice a capture. Then graph / fixture tests with DSERVE_SIDE_PDL=1, A/B three rounds, a bf16 b1 trace.
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
