#!/usr/bin/env bash
# Session 38, second call (~330 s; binaries dserve, ds_ops_cuda_gpu_test from the working tree): the shared experts'
# L2 prefetch (Ops::prefetch_l2, opt-in DSERVE_L2_PREFETCH_MB): a stream forked after the q / kv_a pair bulk-prefetches
# the layer's shared gate|up and down weights (evict-last) while the attention chain's latency-bound kernels leave the
# HBM idle; the shared expert's side section joins it, so its kernels read from the L2 and the routed experts get the
# HBM to themselves. (1) the kernel's tests and the graph test with it on (every fixture: forked and joined inside
# each MoE layer, replays equal eager); (2) A/B two rounds, FP8 (17.3 MB of shared weights: budget 24 MB, with and
# without the evict-last policy) and bf16 (34.6 MB: budget 40 = both, 24 = gate|up only), batch 1 / 8;
# (3) one layer's timeline, FP8 and bf16 batch 1, with the prefetch, and FP8 without.
# Prediction: if the prefetched lines survive to the shared expert, its kernels shorten (FP8 gate|up + down from
# L2) and the routed phase gets ~4 us more of HBM a layer: FP8 b1 -3 to -5%, bf16 -2 to -4%; a loss if the prefetch
# slows the chain's latency-bound kernels (session 13 saw prep 5.4 -> 10.4 us under a 128-CTA prefetch).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run prefetch 150 'L2Prefetch.*:*ReplayMatchesEagerDecode*'
grep -E "GRAPHSTATS|GRAPH |Failure|FAILED" "$OUT/prefetch.log" | head -24
AB_KINDS=fp8 AB_ROUNDS=2 AB_BINS="new pf pfn" AB_CFG_pf=DSERVE_L2_PREFETCH_MB=24 \
  AB_CFG_pfn=DSERVE_L2_PREFETCH_MB=24,DSERVE_L2_PREFETCH_EVICT_LAST=0 bash "$D/abbin.sh"
AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new pf40 pf24" AB_CFG_pf40=DSERVE_L2_PREFETCH_MB=40 \
  AB_CFG_pf24=DSERVE_L2_PREFETCH_MB=24 bash "$D/abbin.sh"
DSERVE_L2_PREFETCH_MB=24 OUT=$OUT/trace_fp8_pf TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
OUT=$OUT/trace_fp8 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
DSERVE_L2_PREFETCH_MB=40 OUT=$OUT/trace_bf16_pf TRACE_BS=1 \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
