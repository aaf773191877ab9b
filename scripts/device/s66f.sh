#!/usr/bin/env bash
# Session 66, the budget's last minutes: the walks' 8-stage ring (DSERVE_MOE_WGMMA_STAGES=8: +0.6-0.9% at V2-Lite FP8
# batch 1 / 8 in s66e) at larger batches and on the V3-shaped FP8 model, against the default (6 for FP8), two rounds
# alternating. Binaries: dserve (~120 s).
set -u
source "$(dirname "$0")/lib.sh"
for round in 1 2; do
  b1b_run def_$round --quantization fp8 --batch-size 16 32 64 --output-len 32
  DSERVE_MOE_WGMMA_STAGES=8 b1b_run st8_$round --quantization fp8 --batch-size 16 32 64 --output-len 32
done
v3_config "$OUT/v3.json" 4
decode_run v3_def "$OUT/v3.json" --batch-size 1 8 32 --output-len 32
DSERVE_MOE_WGMMA_STAGES=8 decode_run v3_st8 "$OUT/v3.json" --batch-size 1 8 32 --output-len 32
