#!/usr/bin/env bash
# Session 25: the FP8 MoE small-M kernel's first weight round before the PDL wait (gate|up too, where a quantization
# launch separates it from the grouping) and the wave-ahead L2 prefetch (DSERVE_MOE_L2_AHEAD_MB). MoE FP8 GPU tests
# (sharded), the MoE timing tests per setting, then bench-one-batch (V2-Lite dummy, --quantization fp8, batch 1 and
# 8) alternating: new default / the old behaviour / 48 MB ahead, twice. The prefetch lost and was removed after this
# run (DSERVE_MOE_L2_AHEAD_MB no longer exists).
set -u
source "$(dirname "$0")/lib.sh"
OLD="DSERVE_MOE_L2_AHEAD_MB=0,DSERVE_MOE_FP8_SETTLED=0"
GTEST_FILTER='MoeFp8Test.*:*Fp8Fixture*' OUT=$OUT/tests bash "$(dirname "$0")/gpusuite.sh"
for cfg in base "$OLD" DSERVE_MOE_L2_AHEAD_MB=0 DSERVE_MOE_L2_AHEAD_MB=48; do
  envs=(); [ "$cfg" = base ] || IFS=',' read -r -a envs <<< "$cfg"
  env "${envs[@]}" GTEST_FILTER='MoeFp8Test.V2LiteDecodeBandwidth:MoeFp8Test.V3LayerDecodeTiming' timeout 100 \
    "$B/ds_ops_cuda_gpu_test" > "$OUT/timing_$(echo "$cfg" | tr -c 'A-Za-z0-9_\n' '_').log" 2>&1
  echo "== timing $cfg rc=$?"; grep -hE "^MOEFP8(BW|V3)" "$OUT/timing_$(echo "$cfg" | tr -c 'A-Za-z0-9_\n' '_').log"
done
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base $OLD DSERVE_MOE_L2_AHEAD_MB=48" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
