#!/usr/bin/env bash
# Prepared in session 54 (no device lent) for the call after s54b (binary dserve and libds_cupti_trace.so; ~420 s):
# the rest of s54b's opt-ins.
# (1) The V3-shaped 3-layer model at 32 / 64: the default vs clusters with V3's 15-117 MB attention and shared-expert
# weights let onto the wgmma GEMM (DSERVE_FP8_WGMMA_MAX_MB=128). (2) V2-Lite FP8 at 32: clusters from 17 tokens
# (DSERVE_FP8_WGMMA_MIN_M=17; one range lost there in session 52). (3) V2-Lite FP8 48 / 64 with clusters and the
# SiLU's quantization together against the default. Alternating rounds throughout. (4) A trace of batch 64 with both.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="base cl" AB_CFG_base=base \
  AB_CFG_cl=DSERVE_FP8_WGMMA_CLUSTER=8,DSERVE_FP8_WGMMA_MAX_MB=128 AB_ROUNDS=2 OUT=$OUT/v3 bash "$D/abbin.sh"
AB_BATCHES=32 AB_KINDS="fp8" AB_BINS="base cl17" AB_CFG_base=base \
  AB_CFG_cl17=DSERVE_FP8_WGMMA_CLUSTER=8,DSERVE_FP8_WGMMA_MIN_M=17 AB_ROUNDS=2 OUT=$OUT/m17 bash "$D/abbin.sh"
AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="base both" AB_CFG_base=base \
  AB_CFG_both=DSERVE_FP8_WGMMA_CLUSTER=8,DSERVE_FP8_SILU_QUANT=1 AB_ROUNDS=2 OUT=$OUT/both bash "$D/abbin.sh"
# (4) Where batch 64's step goes with both switches (needs build/libds_cupti_trace.so in .devbin): the per-layer
# timeline, for the launches left between the GEMMs, the walks and the MLA decode (~40 us a layer in session 53).
DSERVE_FP8_WGMMA_CLUSTER=8 DSERVE_FP8_SILU_QUANT=1 OUT=$OUT/t64 TRACE_BS=64 TRACE_EXTRA="--quantization fp8" \
  bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py fp8_64 "$OUT/t64/trace_bs64.csv" --replays 1 2>/dev/null | head -60
sed -n 1,40p "$OUT/t64/summary_bs64.txt"
