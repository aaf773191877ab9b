#!/usr/bin/env bash
# Run record: the flag join's first form (signal awaited before the consumer's PDL wait, tight polling, early trigger right after it) was in this call's binaries; the call ran twice (the first aborted on a combine() bug, fixed before the second).
# Session 45, second call (~420 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): the flag join of
# the shared expert into the MoE-summing norm (CudaOps::combine, DSERVE_SIDE_FLAG_JOIN, default on): (1) the whole GPU
# suite on it (with the new Pdl.FlagJoinedAddendWaitsForItsSignal), the PDL join probes printed; (2) bench-one-batch
# A/B two rounds bf16 / FP8 b1 / b8 / b32, flag join vs the event join (=0); (3) a bf16 b1 trace with the flag join.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
grep -h "PDLJOIN graph\|FlagJoined" "$OUT"/*.log | sort | uniq | head -12
AB_BATCHES=1,8,32 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new ev" AB_CFG_ev=DSERVE_SIDE_FLAG_JOIN=0 bash "$D/abbin.sh"
OUT=$OUT/trace_fj TRACE_BS="1" TRACE_EXTRA="" TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" > "$OUT/trace_fj.txt" 2>&1
echo "== trace fj bf16: $(ls $OUT/trace_fj)"; grep -A16 "^links" "$OUT/trace_fj/summary_bs1.txt"
xz -9 "$OUT/trace_fj/trace_bs1.csv"
