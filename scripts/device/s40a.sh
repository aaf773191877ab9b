#!/usr/bin/env bash
# Prepared in session 39 for session 40's first call (~370 s; binaries dserve, ds_ops_cuda_gpu_test from main): the bf16
# MoE walk on wgmma (opt-in DSERVE_MOE_BF16_WGMMA=n: from n tokens on) before making it a default. (1) its tests:
# MoeGemmGpu.Bf16WgmmaWalkMatchesTheKernels (s39i failed it on a test bug, fixed, never rerun: every decode shape at
# 1 / 5 / 12 / 16 rows against the grouped kernel and an fp64 product), MoeGroupedTest.Bf16WgmmaWalkThroughTheOps
# (with the n = 8 switch now), the FP8 walk's; the MoE layer timings (V2-Lite and V3, now on the default backend
# with the mma.sync kernels' time beside: issue 7's V3 layer-vs-roofline table); memcheck on the kernel test;
# (2) A/B bf16 V2-Lite b1 / b4 / b8 / b16 two rounds: new (off), bw1 (every size), bw8 (from 8 tokens), bw1 at 4 and
# 8 stages (DSERVE_MOE_WGMMA_STAGES: the batch-1 loss, s39i 2.08-2.10 vs 2.03); (3) FP8 b1 / b8 / b16 one round at
# 4 / 8 stages against the default 6.
# Then: make n = 8 (or what wins) the default, pin the tests' reference backends as moe_fp8_gpu_test does, run the
# GPU suite.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run bf16wg 150 'MoeGemmGpu.Bf16WgmmaWalk*:MoeGroupedTest.Bf16WgmmaWalk*:MoeFp8Test.WgmmaWalk*'
grep -E "MOEBF16WGMMA|MOEFP8WGMMA|Failure" "$OUT/bf16wg.log" | head -40
gtest_run moelayer 150 'MoeFp8Test.V2LiteDecodeBandwidth:MoeFp8Test.V3LayerDecodeTiming'
grep -E "MOEFP8BW|MOEFP8V3|Failure" "$OUT/moelayer.log" | head -20
memcheck_run memcheck 120 'MoeGemmGpu.Bf16WgmmaWalk*'
AB_BATCHES=1,4,8,16 AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new bw1 bw8 bw1s4 bw1s8" AB_CFG_bw1=DSERVE_MOE_BF16_WGMMA=1 \
  AB_CFG_bw8=DSERVE_MOE_BF16_WGMMA=8 AB_CFG_bw1s4=DSERVE_MOE_BF16_WGMMA=1,DSERVE_MOE_WGMMA_STAGES=4 \
  AB_CFG_bw1s8=DSERVE_MOE_BF16_WGMMA=1,DSERVE_MOE_WGMMA_STAGES=8 bash "$D/abbin.sh"
AB_BATCHES=1,8,16 AB_KINDS=fp8 AB_ROUNDS=1 AB_BINS="new s4 s8" AB_CFG_s4=DSERVE_MOE_WGMMA_STAGES=4 \
  AB_CFG_s8=DSERVE_MOE_WGMMA_STAGES=8 bash "$D/abbin.sh"
# (4) bf16 batch-1 timelines, walk off and on (issue 6's -4%: where does the walk lose at one token?)
for cfg in off:0 on:1; do
  OUT=$OUT/trace_bf16_${cfg%%:*} DSERVE_MOE_BF16_WGMMA=${cfg#*:} TRACE_BS="1" \
    TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" > "$OUT/trace_bf16_${cfg%%:*}.txt" 2>&1
  echo "== trace bf16 ${cfg%%:*}"; sed -n "/^per decode step/,/total kernel time/p;/^timeline/,\$p" "$OUT/trace_bf16_${cfg%%:*}.txt"
done
