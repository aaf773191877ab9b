#!/usr/bin/env bash
# Session 43, third call (~220 s; binaries dserve, libds_cupti_trace.so): the shared MLP's L2 prefetch with the
# prefetched lines evict-last (DSERVE_PREFETCH_EVICT_LAST=1; s43a's normal-priority form lost: FP8 b1 +1-2%, bf16 +3%).
# (1) A/B two rounds bf16 / FP8 V2-Lite b1 / b8: default vs p1L (gate|up) vs p2L (gate|up and down);
# (2) FP8 b1 traces default and p2L (CSVs kept: the shared MLP's durations and the walks' links).
# Run record: DSERVE_PREFETCH_SHARED was removed in 05bfbee, and DSERVE_PREFETCH_EVICT_LAST (a cache-hint form of
# kernels/l2_prefetch.cu) was built from an uncommitted working tree and never landed.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new p1L p2L" \
  AB_CFG_p1L=DSERVE_PREFETCH_SHARED=1,DSERVE_PREFETCH_EVICT_LAST=1 \
  AB_CFG_p2L=DSERVE_PREFETCH_SHARED=2,DSERVE_PREFETCH_EVICT_LAST=1 bash "$D/abbin.sh"
for v in base p2L; do
  if [ $v = p2L ]; then export DSERVE_PREFETCH_SHARED=2 DSERVE_PREFETCH_EVICT_LAST=1; fi
  OUT=$OUT/trace_$v TRACE_BS="1" TRACE_EXTRA="--quantization fp8" TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" \
    > "$OUT/trace_$v.txt" 2>&1
  echo "== trace $v fp8"; grep -E "Decode\.  median" "$OUT/trace_$v.txt"
  xz -9 "$OUT/trace_$v/trace_bs1.csv"
done
