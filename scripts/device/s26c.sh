#!/usr/bin/env bash
# Session 26, third call: the H200's tuning tables (issue 7: per-GPU dispatch by measurement). `dserve tune-gemm`
# (tune.sh: V3, V3.2, V2-Lite merged) into configs/fp8_gemm/<GPU>.json and `dserve tune-moe` (V2-Lite, V3) into
# configs/moe_fp8/<GPU>.json, both copied to $OUT to commit; then, with those tables, dserve_fp8_gemm_bench and
# bench-one-batch V2-Lite --quantization fp8 (batch 1, 8, 64, input 256: s26b ran the same without tables).
set -u
source "$(dirname "$0")/lib.sh"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
start=$(date +%s)
OUT=$OUT/gemm timeout 280 bash "$(dirname "$0")/tune.sh" | grep -E "^==|merged|small_m_max" | head -40
mkdir -p configs/fp8_gemm configs/moe_fp8
# (As run, this line copied fp8_gemm_<GPU>.json under that name, so the benches below ran without the table: s26d.)
cp "$OUT/gemm/fp8_gemm_$name.json" "configs/fp8_gemm/$name.json" && cp "configs/fp8_gemm/$name.json" "$OUT/fp8_gemm_table.json"
echo "== tune-gemm done ($(( $(date +%s) - start )) s)"
for cfg in deepseek-v2-lite deepseek-v3; do
  s=$(date +%s)
  timeout 90 "$B/dserve" tune-moe --model-path tests/data/configs/$cfg.json --output configs/moe_fp8/$name.json \
    > "$OUT/tune_moe_$cfg.log" 2>&1
  echo "== tune-moe $cfg rc=$? ($(( $(date +%s) - s )) s)"; grep -E "tokens:|grouped_max" "$OUT/tune_moe_$cfg.log"
done
cp configs/moe_fp8/$name.json "$OUT/moe_fp8_table.json"
timeout 70 "$B/dserve_fp8_gemm_bench" --csv "$OUT/fp8_gemm.csv" > "$OUT/fp8_gemm.log" 2>&1
echo "== fp8_gemm_bench rc=$?"; grep -E "copy|table" "$OUT/fp8_gemm.log" | head -3
timeout 80 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
  --load-format dummy --batch-size 1,8,64 --input-len 256 --output-len 32 --quantization fp8 > "$OUT/bob.log" 2>&1
echo "== bench-one-batch fp8 rc=$?"; grep -E "^(Prefill\.|Decode\.  median)" "$OUT/bob.log"
