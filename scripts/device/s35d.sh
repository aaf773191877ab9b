#!/usr/bin/env bash
# Session 35's last call ran this with a 110 s limit a run and two rounds: both binaries were cut at 110 s with no
# output (dummy FP8 V3 layers take long to make on the host; v3fp8.sh allows 240 s for 3 layers). Now one round,
# 140 s a run (session 36: `all.sh s36a:290 s35d:300`, after the host FP8 encoder got ~7x faster). Binaries: dserve = main, prev/dserve = 33110f4 (the FP8 walk
# reading each tile's slot record between tiles). The records-ahead walk on a DeepSeek-V3-shaped model (the real
# config, 5 layers: 1 dense + 4 MoE of 256 experts, no MTP, its block-FP8 quantization_config: dummy FP8 weights run
# natively; there only the down product walks, K = 2048), batch 1 / 8.
set -u
source "$(dirname "$0")/lib.sh"
v3_config "$OUT/v3l5fp8.json" 5
for round in 1; do
  for bin in prev new; do
    dir=$B; [ "$bin" = prev ] && dir=$B/prev
    start=$(date +%s)
    log="$OUT/v3fp8_${bin}_$round.log"
    timeout 140 "$dir/dserve" bench-one-batch --device cuda --model-path "$OUT/v3l5fp8.json" --load-format dummy \
      --batch-size 1,8 --input-len 256 --output-len 32 > "$log" 2>&1
    echo "== v3 5-layer fp8 $bin round $round rc=$? ($(( $(date +%s) - start )) s)"
    grep -E "Decode\.  median|rror" "$log" | head -3
  done
done
