#!/usr/bin/env bash
# Native FP8 as the CUDA default (issue 7): the demo model's bench-accuracy (accuracy.sh: --quantization fp8 and
# the fp8_e4m3 cache now run natively), and V2-Lite `--quantization fp8` bench-one-batch with the default (native)
# vs DSERVE_FP8_NATIVE=0 (dequantized to bf16) vs the bf16 model, same run. Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
OUT="$OUT/acc" timeout 200 bash scripts/device/accuracy.sh 2>&1 | grep -E "==|Accuracy"
for v in "bf16 x" "fp8 default" "fp8 0"; do
  set -- $v
  q=(); [ $1 = fp8 ] && q=(--quantization fp8)
  env $([ $2 = 0 ] && echo DSERVE_FP8_NATIVE=0) timeout 150 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy "${q[@]}" --batch-size 1,64 \
    --input-len 512 --output-len 32 > "$OUT/b1b_$1_$2.log" 2>&1
  echo "== b1b $1 native=$2 rc=$?"; grep -E "weights|median|^Prefill" "$OUT/b1b_$1_$2.log" | head -8
done
