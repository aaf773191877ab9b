#!/usr/bin/env bash
# Session 36 (~150 s; binaries dserve, ds_ops_cuda_gpu_test from main): the combine's o_proj quantization now only
# where the combine's blocks fit one an SM (s36f: V3's 128 heads lost 2%). (1) The MLA combine tests (the kernel at
# 16 and 128 heads, the op's choice); (2) V3 5-layer FP8 once each, main vs DSERVE_MLA_VC_QUANT=0 (now the same
# kernels: equal within noise); (3) V2-Lite --quantization fp8 once each (the fused path still taken).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_TEST_NO_TIMING=1 gtest_run mla_vc_tests 120 'MlaAbsorbedVc.*'
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BATCHES=1,4 AB_BINS="new vq0" \
  AB_CFG_vq0=DSERVE_MLA_VC_QUANT=0 bash "$D/abbin.sh"
AB_KINDS=fp8 AB_ROUNDS=1 AB_BATCHES=1,4 AB_BINS="new vq0" AB_CFG_vq0=DSERVE_MLA_VC_QUANT=0 bash "$D/abbin.sh"
