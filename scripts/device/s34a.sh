#!/usr/bin/env bash
# Prepared in session 33 (~200 s; binaries dserve, ds_ops_cuda_gpu_test; prev/dserve = main 21e6e56 for the A/B):
# session 33's last commits ran on no device (its budget was spent): the walks' shared slot read / resident-grid
# helpers (moe_block.cuh; the FP8 walk's machine code was checked identical, the bf16 walk's changed: 78 vs 70-72
# registers) and the small-M MoE tests' shared routing (gpu_test_util.h). (1) The MoE GPU tests, both walks bit for
# bit against their one-round kernels (MOEWALK / MOEFP8WALK timing lines). (2) bf16 batch 1 / 8: prev, new, wd
# (DSERVE_MOE_SMALL_WALK=1), wa (=2: gate|up walked too; at batch 8 a quarter of the one-round gate|up's 176 x 48
# CTAs find an empty slot after the PDL wait, the walk stops there; =2 lost at batch 1 before the stop, s33d);
# FP8: prev, new (the empty-slot stop: 3.88 vs 4.04 ms at batch 8 in s33f). Session 34 had no prev build (fresh
# machine; the FP8 walk's machine code is s33f's): S34A_BINS / S34A_FP8_BINS name the binaries, default without prev.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='MoeGemmGpu.*:MoeFp8*:MoeGrouped*' SUITE_LIMIT=150 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
grep -rh "MOEWALK\|MOEFP8WALK" "$OUT" 2>/dev/null | sort | uniq | head -60
AB_KINDS=bf16 AB_BINS="${S34A_BINS:-new wd wa}" AB_CFG_wd=DSERVE_MOE_SMALL_WALK=1 AB_CFG_wa=DSERVE_MOE_SMALL_WALK=2 \
  bash "$(dirname "$0")/abbin.sh"
AB_KINDS=fp8 AB_BINS="${S34A_FP8_BINS:-new}" AB_ROUNDS=1 bash "$(dirname "$0")/abbin.sh"
