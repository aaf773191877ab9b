#!/usr/bin/env bash
# Session 36's last call (~220 s; binaries dserve, ds_ops_cuda_gpu_test from main 7411d59+): (1) the whole GPU suite
# on the session's final code (the combine + W_UV kernel's FP8 quantization on by default; the speculative tile and
# the walk's last-CTA quantization removed); (2) compute-sanitizer memcheck on the MLA combine tests (the cluster
# launch's distributed shared-memory reads included); (3) headline figures: FP8 A/B two rounds alternating, batch
# 1 / 4 / 8, main vs DSERVE_MLA_VC_QUANT=0, and bf16 once.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
SKIP_PLAIN=1 MEMCHECK=1 SHARDS=1 MEMCHECK_LIMIT=150 GTEST_FILTER='MlaAbsorbedVc.*' DSERVE_TEST_NO_TIMING=1 \
  bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!|ERROR SUMMARY"
AB_KINDS=fp8 AB_ROUNDS=2 AB_BATCHES=1,4,8 AB_BINS="new vq0" AB_CFG_vq0=DSERVE_MLA_VC_QUANT=0 bash "$D/abbin.sh"
AB_KINDS=bf16 AB_ROUNDS=1 AB_BATCHES=1,8 AB_BINS="new" bash "$D/abbin.sh"
