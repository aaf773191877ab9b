#!/usr/bin/env bash
# Prepared in session 40 for session 41's first call (~470 s; binaries dserve, ds_ops_cuda_gpu_test from main):
# (1) the whole GPU suite under 13d377b's default (the MoE walks past 16 tokens up to DSERVE_MOE_WALK_MAX_TOKENS=128
# where the rows average <= 8 an expert: never run under the suite; its own tests passed in s40e with the switch at
# 256), with 3c0e041 / 60c101c's test helpers (test::same_bits) and 04b3e31's review (SASS-identical kernels), none
# run on a GPU yet; (2) the MoE layer timings (MOEFP8BW / MOEFP8V3 at 32-128 tokens now on the walk: BENCHMARKS' V3
# layer-vs-roofline table); (3) A/B two rounds, default vs the switch at 16 (the pipelined tiles) and at 256
# (unmeasured: V3 averages 8 rows an expert there), V3-shaped FP8 5 layers b32 / b64 / b128 / b256, V2-Lite FP8 and
# bf16 b32 / b64.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
gtest_run moelayer 150 'MoeFp8Test.V2LiteDecodeBandwidth:MoeFp8Test.V3LayerDecodeTiming'
grep -E "MOEFP8BW|MOEFP8V3|Failure" "$OUT/moelayer.log" | head -20
v3_config "$OUT/v3l5fp8.json" 5
AB_BATCHES=32,64,128,256 AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new w16 w256" \
  AB_CFG_w16=DSERVE_MOE_WALK_MAX_TOKENS=16 AB_CFG_w256=DSERVE_MOE_WALK_MAX_TOKENS=256 bash "$D/abbin.sh"
AB_BATCHES=32,64 AB_KINDS="fp8 bf16" AB_ROUNDS=2 AB_BINS="new w16" AB_CFG_w16=DSERVE_MOE_WALK_MAX_TOKENS=16 \
  bash "$D/abbin.sh"
