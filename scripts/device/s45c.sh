#!/usr/bin/env bash
# Run record: the flag join's second form (signal awaited after the PDL wait) was in this call's binaries only; replaced by the third (s45d).
# Session 45, third call (~330 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): the flag join's
# second form (the consumer waits for the signal after its PDL wait and lets its dependents start only then, early
# trigger or not): (1) the whole GPU suite; (2) bench-one-batch A/B two rounds bf16 / FP8 b1 / b8 / b32, flag join vs
# the event join (DSERVE_SIDE_FLAG_JOIN=0); (3) bf16 and FP8 b1 traces with the flag join.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
AB_BATCHES=1,8,32 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new ev" AB_CFG_ev=DSERVE_SIDE_FLAG_JOIN=0 bash "$D/abbin.sh"
for kind in bf16 fp8; do
  extra=""; [ $kind = fp8 ] && extra="--quantization fp8"
  OUT=$OUT/trace_$kind TRACE_BS="1" TRACE_EXTRA="$extra" TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" > "$OUT/trace_$kind.txt" 2>&1
  echo "== trace $kind"; grep -E "Decode\.  median" "$OUT/trace_$kind/b1b_bs1.log"; grep -A16 "^links" "$OUT/trace_$kind/summary_bs1.txt"
  xz -9 "$OUT/trace_$kind/trace_bs1.csv"
done
