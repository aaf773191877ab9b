#!/usr/bin/env bash
# Before DSERVE_MOE_FP8_PIPE becomes the default (BENCHMARKS.md, session 25): the whole GPU suite with the two-stage
# FP8 MoE walk on for every launch (MoeFp8Test.SmallMColumnTilesAgree also checks it bit for bit against the
# one-round kernel, forced), the MoE timing tests alone (unsharded) both ways, then bench-one-batch (V2-Lite dummy,
# --quantization fp8, batch 1 and 8) alternating default / on, twice. Models aside, carry .devbin (dserve,
# ds_ops_cuda_gpu_test).
set -u
source "$(dirname "$0")/lib.sh"
DSERVE_MOE_FP8_PIPE=1 OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
for cfg in base DSERVE_MOE_FP8_PIPE=1; do
  envs=(); [ "$cfg" = base ] || envs=("$cfg")
  env "${envs[@]}" GTEST_FILTER='MoeFp8Test.V2LiteDecodeBandwidth:MoeFp8Test.V3LayerDecodeTiming' timeout 100 \
    "$B/ds_ops_cuda_gpu_test" > "$OUT/timing_$cfg.log" 2>&1
  echo "== timing $cfg rc=$?"; grep -hE "^MOEFP8(BW|V3)" "$OUT/timing_$cfg.log"
done
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_MOE_FP8_PIPE=1" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
