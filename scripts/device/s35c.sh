#!/usr/bin/env bash
# Session 35 (~440 s; binaries dserve, ds_ops_cuda_gpu_test; the switch of (2) was removed after this run: it lost): (1) the whole GPU suite on main's defaults (the FP8
# walk's records loaded a tile ahead, dbb3a1c). (2) The FP8 down walk with its second tile's weights issued before
# the PDL wait too (DSERVE_MOE_FP8_WALK_EARLY=2): the walk tests and the FP8 fixtures under it, then FP8 A/B, three
# rounds alternating, default vs two. Prediction: the second tile lands ~1 tile time earlier: ~1 us a layer at batch 1.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
DSERVE_MOE_FP8_WALK_EARLY=2 DSERVE_TEST_NO_TIMING=1 timeout 150 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.*:Fp8Fixture*' > "$OUT/two_tests.log" 2>&1
echo "== MoE FP8 / FP8 fixture tests, two tiles early: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/two_tests.log" | tr '\n' ' ')"
AB_KINDS=fp8 AB_ROUNDS=3 AB_BINS="new two" AB_CFG_two=DSERVE_MOE_FP8_WALK_EARLY=2 bash "$D/abbin.sh"
