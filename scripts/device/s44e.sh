#!/usr/bin/env bash
# Run record: DSERVE_SMALL_M_SILU_ROUND was in this call's binaries only, measured, and not landed (BENCHMARKS.md, Session 44).
# Session 44, fifth call (~300 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): the bf16 SiLU pair
# (the shared expert's gate|up) in one round of 8 chunks a warp with its token rows in registers
# (DSERVE_SMALL_M_SILU_ROUND=1): its tests, A/B three rounds bf16 V2-Lite b1 / b4 / b8 (FP8 does not use it), a bf16 b1
# trace (does the shared gate|up end sooner, and the layer?), then the whole GPU suite on this tree (L2Prefetch new).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run silu 120 'GemmSmallM*:L2Prefetch*'
grep -E "rounds of 8|Failure|FAILED" "$OUT/silu.log" | head -20
AB_BATCHES=1,4,8 AB_KINDS="bf16" AB_ROUNDS=3 AB_BINS="new rd" AB_CFG_rd=DSERVE_SMALL_M_SILU_ROUND=1 bash "$D/abbin.sh"
export DSERVE_SMALL_M_SILU_ROUND=1
OUT=$OUT/trace_rd TRACE_BS="1" TRACE_EXTRA="" TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" > "$OUT/trace_rd.txt" 2>&1
xz -9 "$OUT/trace_rd/trace_bs1.csv"
unset DSERVE_SMALL_M_SILU_ROUND
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
