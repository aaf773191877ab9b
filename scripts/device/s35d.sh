#!/usr/bin/env bash
# Session 35, last call (~240 s; binaries dserve = main a343d5e, prev/dserve = 33110f4, the FP8 walk reading each
# tile's slot record between tiles): the records-ahead walk on a DeepSeek-V3-shaped model (the real config, 5
# layers: 1 dense + 4 MoE of 256 experts, no MTP, its block-FP8 quantization_config: dummy FP8 weights run natively;
# there only the down product walks, K = 2048), batch 1 / 8, two rounds alternating.
set -u
source "$(dirname "$0")/lib.sh"
python3 - "$OUT/v3l5fp8.json" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.json"))
c.update(num_hidden_layers=5, first_k_dense_replace=1, num_nextn_predict_layers=0)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
for round in 1 2; do
  for bin in prev new; do
    dir=$B; [ "$bin" = prev ] && dir=$B/prev
    start=$(date +%s)
    log="$OUT/v3fp8_${bin}_$round.log"
    timeout 110 "$dir/dserve" bench-one-batch --device cuda --model-path "$OUT/v3l5fp8.json" --load-format dummy \
      --batch-size 1,8 --input-len 256 --output-len 32 > "$log" 2>&1
    echo "== v3 5-layer fp8 $bin round $round rc=$? ($(( $(date +%s) - start )) s)"
    grep -E "Decode\.  median|rror" "$log" | head -3
  done
done
