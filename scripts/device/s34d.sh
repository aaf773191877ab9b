#!/usr/bin/env bash
# NB: DSERVE_PAIR_EARLY / DSERVE_MOE_NORM_EARLY / DSERVE_NORM_EARLY were that build's switches (never committed); 5797a75
# folded them into DSERVE_PDL_EARLY (unset: the measured defaults, 0 none, 1 all), so on main they are no-ops.
# Session 34, third call (~500 s; binary dserve): the early PDL triggers, two rounds alternating, V2-Lite FP8 and
# bf16 batch 1 / 8: base (the down walk at one token), pe (DSERVE_PAIR_EARLY=1), pen (+ DSERVE_NORM_EARLY=1, the
# post-attention norm), all (+ DSERVE_MOE_NORM_EARLY=1). Then a DeepSeek-V3-shaped bf16 model (the real config,
# 5 layers: 1 dense + 4 MoE of 256 experts, no MTP, no quantization_config: dummy bf16) at batch 1, the one-token
# down walk (default) against DSERVE_MOE_SMALL_WALK=0.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
E_PE=DSERVE_PAIR_EARLY=1
E_PEN=DSERVE_PAIR_EARLY=1,DSERVE_NORM_EARLY=1
E_ALL=DSERVE_PAIR_EARLY=1,DSERVE_NORM_EARLY=1,DSERVE_MOE_NORM_EARLY=1
AB_KINDS=fp8 AB_BINS="new pe pen all" AB_CFG_pe=$E_PE AB_CFG_pen=$E_PEN AB_CFG_all=$E_ALL bash "$D/abbin.sh"
AB_KINDS=bf16 AB_BINS="new pe pen all" AB_CFG_pe=$E_PE AB_CFG_pen=$E_PEN AB_CFG_all=$E_ALL bash "$D/abbin.sh"
v3_config "$OUT/v3l5.json" 5 bf16
for cfg in base DSERVE_MOE_SMALL_WALK=0; do
  start=$(date +%s)
  env $( [ "$cfg" = base ] || echo "$cfg" ) timeout 110 "$B/dserve" bench-one-batch --device cuda \
    --model-path "$OUT/v3l5.json" --load-format dummy --batch-size 1 --input-len 256 --output-len 32 \
    > "$OUT/v3_$cfg.$start.log" 2>&1
  echo "== v3 5-layer bf16 $cfg rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "Decode\.  median|rror" "$OUT/v3_$cfg.$start.log" | head -3
done
