#!/usr/bin/env bash
# Session 36 (~200 s; binary dserve from main): the combine + W_UV kernel's FP8 quantization for o_proj on a
# DeepSeek-V3-shaped model (the real config cut to 5 layers: 1 dense + 4 MoE of 256 experts, no MTP; dummy block-FP8
# weights run natively; 128 heads: 512 combine blocks in clusters of 4), batch 1 / 4 / 8, two rounds alternating:
# main vs DSERVE_MLA_VC_QUANT=0. (AB_KINDS=bf16 here only means no --quantization flag: the config is FP8.)
set -u
source "$(dirname "$0")/lib.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=2 AB_BATCHES=1,4,8 AB_BINS="new vq0" \
  AB_CFG_vq0=DSERVE_MLA_VC_QUANT=0 bash "$(dirname "$0")/abbin.sh"
