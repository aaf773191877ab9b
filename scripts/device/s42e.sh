#!/usr/bin/env bash
# Session 42, fifth call: the shared MLP's weights prefetched into the L2 on the side stream right after each MoE
# layer's input norm (DSERVE_PREFETCH_SHARED=1 gate|up, =2 gate|up and down; kernels/l2_prefetch.cu), so that the
# bandwidth-bound MoE phase reads them from the L2 while the attention's latency-bound launches leave HBM bandwidth
# unused (batch-1 FP8 layer: ~17 MB of shared weights in a ~69 MB MoE phase; bf16 ~35 MB). (1) the new tests (the
# prefetch between two chain kernels keeps the order; graph replays with prefetching match eager decode); (2) A/B two
# rounds FP8 and bf16 V2-Lite b1 / b8: default vs p1 vs p2; (3) an FP8 b1 trace with p2 (CSV kept).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run prefetch 150 'Pdl.*:*CudaGraphTest.ReplayMatchesEagerDecode*'
grep -E "Failure|FAILED|PASSED" "$OUT/prefetch.log" | head -20
AB_BATCHES=1,8 AB_KINDS="fp8 bf16" AB_ROUNDS=2 AB_BINS="new p1 p2" AB_CFG_p1=DSERVE_PREFETCH_SHARED=1 \
  AB_CFG_p2=DSERVE_PREFETCH_SHARED=2 bash "$D/abbin.sh"
DSERVE_PREFETCH_SHARED=2 OUT=$OUT/trace_p2 TRACE_BS="1" TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" > "$OUT/trace_p2.txt" 2>&1
echo "== trace p2 fp8"; sed -n "/^links/,\$p" "$OUT/trace_p2.txt"
xz -9 "$OUT/trace_p2/trace_bs1.csv"
