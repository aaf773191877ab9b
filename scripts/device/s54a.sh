#!/usr/bin/env bash
# Prepared in session 53 for the next session's first call (binaries dserve, ds_ops_cuda_gpu_test; ~400 s): what session 53's
# dynamic MoE walk tiles (default from 8 tokens) left unmeasured. (1) The V3-shaped 3-layer model (256 experts, top-8)
# FP8 at batch 8 / 32 / 64 / 128, static (DSERVE_MOE_WALK_DYNAMIC=0) vs the default, alternating. (2) V2-Lite FP8 at
# batch 2 / 4 / 16: dynamic everywhere (=1) vs static (=0), for the default's lower bound (measured: loss at 1, wins at
# 8-128). (3) With dynamic tiles the side stream's shared MLP no longer leaves late walk CTAs behind: are the stream
# settings measured before it still the best at batch 32 / 64? Default vs DSERVE_SIDE_STREAM=0 (everything on one
# stream) vs DSERVE_SHARED_AFTER_ROUTE=0 (fork before the routing). (4) Session 53's opt-in DSERVE_FP8_WGMMA_PAIR=1
# (V2-Lite's q / kv_a pair in one wgmma launch; written without device time): its GPU case (also under memcheck),
# then V2-Lite FP8 batch 48 / 64 against the default, alternating.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
# First the GPU suite: host code changed after session 53's last device call (the wgmma FP8 GEMM's launch: two unused
# parameters for the pair kernel, prepared parameters in Fp8Gemm::run_wgmma, resident_per_sm; test::quant_act in
# three cases). The kernels' PTX / SASS is unchanged. Since session 54 it also holds that session's three new cases
# (the cluster split, quant_act's SiLU mode, the SiLU's quantization feeding the down: 213 tests), whose switches are
# off by default (s54b measures them).
SUITE_LIMIT=150 bash "$D/gpusuite.sh"
gtest_run pair 60 'Fp8GemmGpu.LinearPairSharesTheQuantization'
memcheck_run pair_mc 120 'Fp8GemmGpu.LinearPairSharesTheQuantization'
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=8,32,64,128 AB_KINDS="fp8" AB_BINS="st dy" AB_CFG_st=DSERVE_MOE_WALK_DYNAMIC=0 \
  AB_CFG_dy=base AB_ROUNDS=2 OUT=$OUT/v3 bash "$D/abbin.sh"
AB_BATCHES=2,4,16 AB_KINDS="fp8" AB_BINS="st dy" AB_CFG_st=DSERVE_MOE_WALK_DYNAMIC=0 AB_CFG_dy=DSERVE_MOE_WALK_DYNAMIC=1 \
  AB_ROUNDS=2 OUT=$OUT/bound bash "$D/abbin.sh"
AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="base one early" AB_CFG_base=base AB_CFG_one=DSERVE_SIDE_STREAM=0 \
  AB_CFG_early=DSERVE_SHARED_AFTER_ROUTE=0 AB_ROUNDS=2 OUT=$OUT/side bash "$D/abbin.sh"
AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="base pair" AB_CFG_base=base AB_CFG_pair=DSERVE_FP8_WGMMA_PAIR=1 \
  AB_ROUNDS=2 OUT=$OUT/pair bash "$D/abbin.sh"
