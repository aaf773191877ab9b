#!/usr/bin/env bash
# Prepared in session 35 (~420 s; binaries dserve, ds_ops_cuda_gpu_test): the FP8 gate|up walk's speculative first
# tile (DSERVE_MOE_FP8_SPEC=1, MoeFp8GemmParams::spec_logits; written without a device, never run). (1) Its kernel
# test (right, wrong and shifted guesses bit for bit against no guess) and the fixture / graph / MoE FP8 tests with
# the switch on (the V2-Lite-style fixtures route softmax-greedy, so the model takes the guess). (2) FP8 A/B, three
# rounds alternating, default vs spec. Prediction: the first gate|up tile's weights (8.6 MB) stream during the
# routing while the HBM idles: ~1.5-2 us a layer at batch 1 (~3%); batch 8 unaffected (one token only).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_TEST_NO_TIMING=1 timeout 100 "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.WalkSpeculative*' \
  > "$OUT/spec_kernel_test.log" 2>&1
echo "== speculative walk kernel test: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/spec_kernel_test.log" | tr '\n' ' ')"
DSERVE_MOE_FP8_SPEC=1 GTEST_FILTER='FixtureGpu*:Fp8Fixture*:CudaGraph*:MoeFp8*' SUITE_LIMIT=150 bash "$D/gpusuite.sh" | \
  grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=fp8 AB_ROUNDS=3 AB_BINS="new spec" AB_CFG_spec=DSERVE_MOE_FP8_SPEC=1 bash "$D/abbin.sh"
