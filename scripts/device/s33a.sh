#!/usr/bin/env bash
# Prepared in session 32 (~250 s; binary dserve): why the decode MoE weight streams run below copy (s32b: FP8 walks
# 2.0-2.6 TB/s, bf16 small-M MoE 3.3-3.4 TB/s in the graphed chain; slot reads and scales a tile ahead did not
# help, s32f). ncu on each kernel alone (caches flushed, no neighbour running, eager, V2-Lite dummy, batch 1; 8
# with NS_B8=1): if a kernel alone streams near copy, the in-chain shortfall is its neighbours (side stream, launch
# overlap); if not, the kernel's bytes in flight / stalls (long scoreboard, LG throttle, barrier) say what to change.
set -u
source "$(dirname "$0")/lib.sh"
# Batch 1 (the issues' lines) first; batch 8 only when NS_B8=1 (each run is capped at NS_TIMEOUT, default 120 s).
for bs in 1 $([ "${NS_B8:-0}" = 1 ] && echo 8); do
  echo "== FP8 batch $bs"
  NS_EXTRA="--quantization fp8" NS_BS=$bs NS_KERNELS="moe_fp8|quant_act" NS_COUNT=24 NS_TIMEOUT=${NS_TIMEOUT:-120} \
    OUT=$OUT/fp8_$bs bash "$(dirname "$0")/ncustream.sh"
  echo "== bf16 batch $bs"
  NS_BS=$bs NS_KERNELS="moe_small_m|small_m_nk" NS_COUNT=24 NS_TIMEOUT=${NS_TIMEOUT:-120} OUT=$OUT/bf16_$bs \
    bash "$(dirname "$0")/ncustream.sh"
done
