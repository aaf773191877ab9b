#!/usr/bin/env bash
# Session 36 (~330 s; binaries dserve, ds_ops_cuda_gpu_test from main). (1) The kernel tests of two unmeasured
# changes: the FP8 gate|up walk's speculative first tile (DSERVE_MOE_FP8_SPEC=1; its test's launch was refused in
# s36a for want of counts / offsets, now set) and the combine + W_UV kernel quantizing o_proj's input in its tail
# (MlaCombineVcParams::q, clusters of 4; DSERVE_MLA_VC_QUANT, on by default). (2) The fixture / graph / MoE FP8 /
# MLA tests with the speculative tile on. (3) FP8 A/B, three rounds alternating, batch 1 / 4 / 8: main (vc quant
# on), spec (+ DSERVE_MOE_FP8_SPEC=1), vq0 (DSERVE_MLA_VC_QUANT=0: the quant_act launch before o_proj as before).
# Predictions: vc quant -1 to -1.3 us a layer at 1-4 tokens (one launch and its PDL hand-off fewer; ~2% at batch 1);
# spec ~1.5-2 us a layer at batch 1 only.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_TEST_NO_TIMING=1 gtest_run new_kernel_tests 120 'MoeFp8Test.WalkSpeculative*:MlaAbsorbedVc.*'
grep -E "Failure|differ|wrote past" "$OUT/new_kernel_tests.log" | head -8
DSERVE_MOE_FP8_SPEC=1 GTEST_FILTER='FixtureGpu*:Fp8Fixture*:CudaGraph*:MoeFp8*:MlaAbsorbed*' SUITE_LIMIT=150 \
  bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=fp8 AB_ROUNDS=3 AB_BATCHES=1,4,8 AB_BINS="new spec vq0" AB_CFG_spec=DSERVE_MOE_FP8_SPEC=1 \
  AB_CFG_vq0=DSERVE_MLA_VC_QUANT=0 bash "$D/abbin.sh"
