#!/usr/bin/env bash
# Session 26, fourth call: s26c's tables committed as configs/fp8_gemm/NVIDIA_H200.json and
# configs/moe_fp8/NVIDIA_H200.json (s26c copied the GEMM table under the wrong name, so its benches ran without
# it): dserve_fp8_gemm_bench and bench-one-batch V2-Lite --quantization fp8 (batch 1, 8, 64, input 256) with them,
# alternating with the GEMM table moved away (A/B), twice.
set -u
source "$(dirname "$0")/lib.sh"
timeout 70 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm.csv" > "$OUT/fp8_gemm.log" 2>&1
echo "== fp8_gemm_bench rc=$?"; grep -E "copy|table" "$OUT/fp8_gemm.log" | head -3
for rep in 1 2; do
  for t in table none; do
    [ $t = none ] && mv configs/fp8_gemm/NVIDIA_H200.json /tmp/t.json
    timeout 80 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
      --load-format dummy --batch-size 1,8,64 --input-len 256 --output-len 32 --quantization fp8 > "$OUT/bob_${t}_$rep.log" 2>&1
    echo "== bench-one-batch fp8 $t rc=$?"; grep -E "^(Prefill\.|Decode\.  median)" "$OUT/bob_${t}_$rep.log"
    [ $t = none ] && mv /tmp/t.json configs/fp8_gemm/NVIDIA_H200.json
  done
done
