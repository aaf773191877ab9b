#!/usr/bin/env bash
# Session 39, second call (~250 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): why the wgmma walk
# (DSERVE_MOE_FP8_WGMMA=1), 30% faster alone at one row an expert (s39a: gate|up 6.97 vs 10.15 us, down 5.09 vs 7.08),
# loses at FP8 b1 (1.65 vs 1.59 ms) and wins at b8 (3.45 vs 3.70). Hypothesis: in the forward, each layer's per-expert
# tensor maps are cold (64 x 2 per layer, evicted by the weight stream), so the first box of a tile waits a memory
# round trip for its descriptor after the PDL wait; DSERVE_MOE_FP8_WGMMA_PREFETCH=1 prefetches every expert's map
# before the wait. (1) the wgmma tests with the prefetch; (2) A/B FP8 b1 / b8 three rounds new / wg / wgpf;
# (3) one FP8 layer's timeline at b1, new and wg, traced.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_MOE_FP8_WGMMA_PREFETCH=1 gtest_run wgmma 150 'MoeFp8Test.WgmmaWalk*'
grep -E "MOEFP8WGMMA|Failure|through the ops" "$OUT/wgmma.log" | head -20
AB_KINDS=fp8 AB_ROUNDS=3 AB_BINS="new wg wgpf" AB_CFG_wg=DSERVE_MOE_FP8_WGMMA=1 \
  AB_CFG_wgpf=DSERVE_MOE_FP8_WGMMA=1,DSERVE_MOE_FP8_WGMMA_PREFETCH=1 bash "$D/abbin.sh"
OUT=$OUT/trace_new TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
DSERVE_MOE_FP8_WGMMA=1 OUT=$OUT/trace_wg TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
