#!/usr/bin/env bash
# Session 42, second call: s42a measured the kQx down walk (DSERVE_MOE_FP8_WALK_QUANT=1) 26 us after the gate|up
# walk's end in every layer of an FP8 b1 step (the default chain: quant_act + walk ~13 us). Is it the kernel? The kQx
# walk timed alone against quant_act + the e4m3 walk (WALKQX lines), and the V2-Lite FP8 MoE layer through the ops with
# the switch off / on (MOEFP8BW lines).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run walkqx 120 'MoeFp8Test.WgmmaWalkQuantizesItsInput'
grep -E "WALKQX|Failure" "$OUT/walkqx.log"
gtest_run layer_default 120 'MoeFp8Test.V2LiteDecodeBandwidth'
grep -E "MOEFP8BW|Failure" "$OUT/layer_default.log"
DSERVE_MOE_FP8_WALK_QUANT=1 gtest_run layer_wq 120 'MoeFp8Test.V2LiteDecodeBandwidth'
grep -E "MOEFP8BW|Failure" "$OUT/layer_wq.log"
