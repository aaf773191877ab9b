#!/usr/bin/env bash
# Session 42, fourth call: the kQx walk's prologue again (s42c: with four unrolled rounds it was 5,064 SASS
# instructions and waited on instruction fetch, 517 of 1,115 stall samples; alone 7.6 us vs 6.4 for quant_act + walk
# at one row, a tie at FP8 b1 and a loss at b4-b16): now the expert's rows staged by cp.async (4 rows a round, all
# copies in flight) and quantized by a rolled loop (1,936 instructions). (1) tests + WALKQX + memcheck; (2) A/B two
# rounds FP8 V2-Lite b1 / b4 / b8 / b16 and V3-shaped 5 layers b1 / b8; (3) the GPU suite under the switch.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run walkqx 150 'MoeFp8Test.WgmmaWalkQuantizesItsInput:MoeFp8Test.WalkQuantThroughTheOps'
grep -E "WALKQX|Failure" "$OUT/walkqx.log" | head -30
memcheck_run walkqx_memcheck 150 'MoeFp8Test.WgmmaWalkQuantizesItsInput'
AB_BATCHES=1,4,8,16 AB_KINDS=fp8 AB_ROUNDS=2 AB_BINS="new wq" AB_CFG_wq=DSERVE_MOE_FP8_WALK_QUANT=1 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_BATCHES=1,8 AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new wq" \
  AB_CFG_wq=DSERVE_MOE_FP8_WALK_QUANT=1 bash "$D/abbin.sh"
DSERVE_MOE_FP8_WALK_QUANT=1 SUITE_LIMIT=150 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
