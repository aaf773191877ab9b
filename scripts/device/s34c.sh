#!/usr/bin/env bash
# NB: DSERVE_PAIR_EARLY / DSERVE_MOE_NORM_EARLY / DSERVE_NORM_EARLY were that build's switches (never committed); 5797a75
# folded them into DSERVE_PDL_EARLY (unset: the measured defaults, 0 none, 1 all), so on main they are no-ops.
# Session 34, second call (~480 s; binary dserve, ds_ops_cuda_gpu_test): (1) the GPU tests that run the bf16 MoE
# (the down walk now the default at one token), the q / kv_a pair, the MoE-summing norm, fixtures and graphs;
# the fixtures and graphs again with both early triggers on (DSERVE_PAIR_EARLY=1: the pair lets the absorbed-MLA
# prep start at its entry; DSERVE_MOE_NORM_EARLY=1: the MoE-summing norm lets the next pair start at its entry).
# (2) bf16 A/B, two rounds: base (walk at one token), nowalk (DSERVE_MOE_SMALL_WALK=0, the old default), pe, ne,
# both. (3) FP8: base, pe, ne, both; then base / both again.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
GTEST_FILTER='MoeGemmGpu.*:MoeGrouped*:FixtureGpu*:Fp8Fixture*:CudaGraph*:RmsNormMoeGpu*:GemmSmallM*:MlaFused*' \
  SUITE_LIMIT=150 OUT=$OUT/t_default bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
DSERVE_PAIR_EARLY=1 DSERVE_MOE_NORM_EARLY=1 GTEST_FILTER='FixtureGpu*:Fp8Fixture*:CudaGraph*:RmsNormMoeGpu*' \
  SUITE_LIMIT=120 OUT=$OUT/t_early bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=bf16 AB_BINS="new nowalk pe ne both" AB_CFG_nowalk=DSERVE_MOE_SMALL_WALK=0 AB_CFG_pe=DSERVE_PAIR_EARLY=1 \
  AB_CFG_ne=DSERVE_MOE_NORM_EARLY=1 AB_CFG_both=DSERVE_PAIR_EARLY=1,DSERVE_MOE_NORM_EARLY=1 bash "$D/abbin.sh"
AB_KINDS=fp8 AB_ROUNDS=1 AB_BINS="new pe ne both" AB_CFG_pe=DSERVE_PAIR_EARLY=1 \
  AB_CFG_ne=DSERVE_MOE_NORM_EARLY=1 AB_CFG_both=DSERVE_PAIR_EARLY=1,DSERVE_MOE_NORM_EARLY=1 bash "$D/abbin.sh"
AB_KINDS=fp8 AB_ROUNDS=1 AB_BINS="both new" AB_CFG_both=DSERVE_PAIR_EARLY=1,DSERVE_MOE_NORM_EARLY=1 \
  OUT=$OUT/r2 bash "$D/abbin.sh"
