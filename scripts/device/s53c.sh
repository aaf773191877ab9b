#!/usr/bin/env bash
# Session 53 (one call for what s53b planned and the dynamic walk tiles): DSERVE_MOE_WALK_DYNAMIC=1 (the MoE walks'
# CTAs take tiles from a counter after their first) - its kernel case and the MoE / fixture cases under the switch,
# then bench-one-batch V2-Lite FP8 48 / 64 / 128 and bf16 64 static vs dynamic, alternating; then s53b's trace of FP8
# batch 64 (per-layer timeline: does the down walk run beside the side stream's shared MLP?), the walks' ring depth
# at 48 / 64 / 128, and ncu on the wgmma kernels at batch 64 (each alone).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run walk 120 '*WgmmaWalkMatchesTheWalk*'
grep -E "MOEFP8WGMMA" "$OUT/walk.log" | head -40
DSERVE_MOE_WALK_DYNAMIC=1 gtest_run dyn 200 '*Moe*:*Fixture*'
grep -E "^\[  FAILED" "$OUT/walk.log" "$OUT/dyn.log" | head
AB_BATCHES=48,64,128 AB_KINDS="fp8" AB_BINS="st dy" AB_CFG_st=base AB_CFG_dy=DSERVE_MOE_WALK_DYNAMIC=1 \
  AB_ROUNDS=2 OUT=$OUT/dyn_ab bash "$D/abbin.sh"
AB_BATCHES=64 AB_KINDS="bf16" AB_BINS="st dy" AB_CFG_st=base AB_CFG_dy=DSERVE_MOE_WALK_DYNAMIC=1 \
  AB_ROUNDS=1 OUT=$OUT/dyn_bf16 bash "$D/abbin.sh"
OUT=$OUT/fp8_64 TRACE_BS=64 TRACE_EXTRA="--quantization fp8" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py fp8_64 "$OUT/fp8_64/trace_bs64.csv" --replays 1 2>/dev/null | head -40
sed -n 1,30p "$OUT/fp8_64/summary_bs64.txt"
AB_BATCHES=64,128 AB_KINDS="fp8" AB_BINS="s6 s4 s8" AB_CFG_s6=base AB_CFG_s4=DSERVE_MOE_WGMMA_STAGES=4 \
  AB_CFG_s8=DSERVE_MOE_WGMMA_STAGES=8 AB_ROUNDS=1 OUT=$OUT/stages bash "$D/abbin.sh"
OUT=$OUT/ncu NS_KERNELS="wgmma" NS_BS=64 NS_COUNT=16 NS_TIMEOUT=150 NS_EXTRA="--quantization fp8" bash "$D/ncustream.sh"
