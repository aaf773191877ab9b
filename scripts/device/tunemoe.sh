#!/usr/bin/env bash
# Issue 7: `dserve tune-moe` for V2-Lite and V3 on this GPU into configs/moe_fp8/<GPU name>.json (copied to $OUT
# to commit), then V2-Lite --quantization fp8 natively with that table (bench-one-batch 1 / 64 x 512), and the
# FP8 tests the table loading touches.
set -u
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT" configs/moe_fp8
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
table=configs/moe_fp8/$name.json
for cfg in deepseek-v2-lite deepseek-v3; do
  timeout 150 "$B/dserve" tune-moe --model-path tests/data/configs/$cfg.json --output "$table" > "$OUT/tune_$cfg.log" 2>&1
  echo "== tune-moe $cfg rc=$?"; cat "$OUT/tune_$cfg.log" | grep -v "^ \|^{\|^}\|\"" | head; grep tokens: "$OUT/tune_$cfg.log"
done
cp "$table" "$OUT/"
DSERVE_FP8_NATIVE=1 timeout 150 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
  --load-format dummy --batch-size 1,64 --input-len 512 --output-len 32 --quantization fp8 > "$OUT/b1b.log" 2>&1
echo "== v2-lite fp8 native with the table rc=$?"; grep -E "^Prefill|median" "$OUT/b1b.log"
timeout 120 "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.MatchesCpuSmallDims:MoeFp8Test.CapturedInGraph:Fp8FixtureGpu.*:Fp8GemmGpu.PreparedHooksInferUe8m0' \
  > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FP8FIXTURE gpu native" "$OUT/tests.log"
