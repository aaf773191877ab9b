#!/usr/bin/env bash
# Session 36 (~300 s; binaries dserve, ds_ops_cuda_gpu_test from main). Two quantization launches folded into their
# producers: the combine + W_UV kernel's tail quantizes o_proj's input (DSERVE_MLA_VC_QUANT, measured in s36b: batch 1
# 1.66 / 1.67 / 1.64 vs 1.66 / 1.69 / 1.66 ms, batch 4 2.72 / 2.74 / 2.70 vs 2.76 / 2.78 / 2.74), and now the FP8
# gate|up walk's last CTA quantizes the SiLU output for the down walk (DSERVE_MOE_FP8_WALK_QUANT; one token: 66
# groups at V2-Lite). (1) Their kernel tests and the MoE FP8 tests; (2) the whole GPU suite; (3) FP8 A/B, three
# rounds alternating, batch 1 / 4 / 8: main (both), wq0 (walk quant off), off (both off).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_TEST_NO_TIMING=1 gtest_run new_kernel_tests 120 'MoeFp8Test.*:MlaAbsorbedVc.*'
grep -E "Failure|differ|wrote past|bf16 output|e4m3 bytes|scales" "$OUT/new_kernel_tests.log" | head -8
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=fp8 AB_ROUNDS=3 AB_BATCHES=1,4,8 AB_BINS="new wq0 off" AB_CFG_wq0=DSERVE_MOE_FP8_WALK_QUANT=0 \
  AB_CFG_off=DSERVE_MOE_FP8_WALK_QUANT=0,DSERVE_MLA_VC_QUANT=0 bash "$D/abbin.sh"
