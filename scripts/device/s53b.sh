#!/usr/bin/env bash
# Session 53, after DSERVE_FP8_FUSED_NORM_WGMMA became the default: where V2-Lite FP8 batch 64's decode step goes now
# (CUPTI trace, per-layer timeline and kernel totals), ncu on the wgmma GEMMs and the MoE walks at batch 64 (eager,
# serialized by ncu: each kernel alone, duration / DRAM throughput / stalls), and the walks' ring depth (4 / 6 / 8
# stages) at batch 48 / 64 / 128 in bench-one-batch. Session 51's trace put the down walk at 0.67 of copy (65 us for
# 184.5 MB) against the gate|up walk's 0.88: is it the kernel, or the side stream's shared MLP holding SMs?
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
OUT=$OUT/fp8_64 TRACE_BS=64 TRACE_EXTRA="--quantization fp8" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py fp8_64 "$OUT/fp8_64/trace_bs64.csv" --replays 1 2>/dev/null | head -40
sed -n 1,40p "$OUT/fp8_64/summary_bs64.txt"
OUT=$OUT/ncu NS_KERNELS="wgmma" NS_BS=64 NS_COUNT=16 NS_TIMEOUT=200 NS_EXTRA="--quantization fp8" bash "$D/ncustream.sh"
AB_BATCHES=48,64,128 AB_KINDS="fp8" AB_BINS="s6 s4 s8" AB_CFG_s6=base AB_CFG_s4=DSERVE_MOE_WGMMA_STAGES=4 \
  AB_CFG_s8=DSERVE_MOE_WGMMA_STAGES=8 AB_ROUNDS=1 OUT=$OUT/stages bash "$D/abbin.sh"
