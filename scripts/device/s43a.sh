#!/usr/bin/env bash
# Prepared in session 42 for session 43's first call (~200 s; binaries dserve, ds_ops_cuda_gpu_test,
# libds_cupti_trace.so from main): the shared MLP's L2 prefetch, second form (DSERVE_PREFETCH_SHARED=1 gate|up,
# =2 gate|up and down): one CTA an SM issuing the 64 KB bulk requests (s42e's nine CTAs drained 17 MB in 46 us), on a
# third stream that nothing waits for until the forward's end (s42e's form sat on the side stream ahead of the shared
# MLP, whose 352 CTAs then waited resident and held SM slots). Written without a GPU. (1) its tests (the kernel
# eagerly and in a captured fork / join; graph replays of a prefetching model against eager decode); (2) A/B two
# rounds FP8 and bf16 V2-Lite b1 / b8: default vs p1 vs p2; (3) an FP8 b1 trace with p2 (CSV kept: how long the
# prefetch launch runs, whether the shared gate|up / down and the attention's links move).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run prefetch 150 'L2Prefetch.*:*CudaGraphTest.ReplayMatchesEagerDecode*'
grep -E "Failure|FAILED|PASSED" "$OUT/prefetch.log" | head -20
AB_BATCHES=1,8 AB_KINDS="fp8 bf16" AB_ROUNDS=2 AB_BINS="new p1 p2" AB_CFG_p1=DSERVE_PREFETCH_SHARED=1 \
  AB_CFG_p2=DSERVE_PREFETCH_SHARED=2 bash "$D/abbin.sh"
DSERVE_PREFETCH_SHARED=2 OUT=$OUT/trace_p2 TRACE_BS="1" TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" > "$OUT/trace_p2.txt" 2>&1
echo "== trace p2 fp8"; sed -n "/^links/,\$p" "$OUT/trace_p2.txt"
xz -9 "$OUT/trace_p2/trace_bs1.csv"
