#!/usr/bin/env bash
# Session 50, eighth call (binaries dserve, ds_ops_cuda_gpu_test): experiment DSERVE_SMALL_M_WIDE_ONE=1 (V2-Lite's
# bf16 o_proj stages its K = 2048 whole before the PDL wait, rounds of 8; s49e's WIDE_PRE=2 had done so together with
# the shared down and lost 0.8%): GemmSmallM tests under it, then bench-one-batch bf16 1,8 three rounds alternating.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_SMALL_M_WIDE_ONE=1 gtest_run gemm_wide_one 60 'GemmSmallM*'
AB_BATCHES=1,8 AB_KINDS="bf16" AB_BINS="base wone" AB_CFG_wone=DSERVE_SMALL_M_WIDE_ONE=1 AB_ROUNDS=3 bash "$D/abbin.sh"
