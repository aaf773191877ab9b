#!/usr/bin/env bash
# Session 40, last call (~220 s): the walks past 16 tokens (opt-in DSERVE_MOE_WALK_MAX_TOKENS=256: an expert past 16
# rows takes a pass over its weights per 16; written this session, never run): their ops tests and the walk tests
# (the one-pass kernels are SASS-identical to s40d's), memcheck on the new tests; then V3-shaped FP8 5 layers b32 /
# b64 / b128 and V2-Lite FP8 / bf16 b32 / b64, one round, new vs w256.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run passes 90 'MoeFp8Test.WgmmaWalk*:MoeGroupedTest.Bf16WgmmaWalk*'
grep -E "Failure|FAILED|passes," "$OUT/passes.log" | head -20
memcheck_run memcheck 80 'MoeFp8Test.WgmmaWalkPassesThroughTheOps:MoeGroupedTest.Bf16WgmmaWalkPassesThroughTheOps'
v3_config "$OUT/v3l5fp8.json" 5
AB_BATCHES=32,64,128 AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BINS="new w256" \
  AB_CFG_w256=DSERVE_MOE_WALK_MAX_TOKENS=256 bash "$D/abbin.sh"
AB_BATCHES=32,64 AB_KINDS="fp8 bf16" AB_ROUNDS=1 AB_BINS="new w256" AB_CFG_w256=DSERVE_MOE_WALK_MAX_TOKENS=256 \
  bash "$D/abbin.sh"
