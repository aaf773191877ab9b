#!/usr/bin/env bash
# V2-Lite with --quantization fp8 (issue 7): bench-one-batch batch 1 / 64, input 512 / output 32, bf16 weights vs
# block-FP8 weights computed natively (DSERVE_FP8_NATIVE=1: attention linears, routed and shared experts W8A8;
# the dense layer's MLP (inter 10944, not a multiple of 128) and kv_b_proj dequantized) vs block-FP8
# dequantized at load. Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
ARGS=(bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy
      --batch-size 1,64 --input-len 512 --output-len 32)
for mode in bf16 fp8_native fp8_dequant; do
  case $mode in
    bf16) env=(); extra=() ;;
    fp8_native) env=(DSERVE_FP8_NATIVE=1); extra=(--quantization fp8) ;;
    fp8_dequant) env=(); extra=(--quantization fp8) ;;
  esac
  timeout 120 env "${env[@]}" "$B/dserve" "${ARGS[@]}" "${extra[@]}" > "$OUT/$mode.log" 2>&1
  echo "== $mode rc=$?"; grep -E "^Prefill|median" "$OUT/$mode.log"
done
