#!/usr/bin/env bash
# Session 35 (~480 s; binaries dserve, ds_ops_cuda_gpu_test): the MoE walks load each tile's slot record a tile
# ahead (moe_detail::WalkRec; DSERVE_MOE_WALK_AHEAD, default on in this binary) instead of two dependent L2 reads
# between one tile's reduction and the next tile's copies. (1) MoE / fixture GPU tests with it on (the walk tests
# compare the walks bit for bit with the one-round kernels), the walk tests again with it off. (2) A/B, three
# rounds alternating, FP8 and bf16 at batch 1 / 8: new (ahead) vs off (=0). Prediction: the FP8 walks at one token
# (4 and 3 tiles a CTA) lose one L2 round trip (~1 us under load) per tile: up to ~3 us a layer.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
GTEST_FILTER='MoeGemmGpu.*:MoeFp8Test.*:MoeGrouped*:FixtureGpu*:Fp8Fixture*:CudaGraph*' SUITE_LIMIT=150 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
DSERVE_MOE_WALK_AHEAD=0 DSERVE_TEST_NO_TIMING=1 timeout 120 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeGemmGpu.SmallMWalk*:MoeFp8Test.SmallMColumnTilesAgree' > "$OUT/walk_off_tests.log" 2>&1
echo "== walk tests, ahead off: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/walk_off_tests.log" | tr '\n' ' ')"
grep -h "MOEWALK\|MOEFP8WALK" "$OUT"/ds_ops_cuda_gpu_test*.log 2>/dev/null | head -20
AB_ROUNDS=3 AB_BINS="new off" AB_CFG_off=DSERVE_MOE_WALK_AHEAD=0 bash "$D/abbin.sh"
