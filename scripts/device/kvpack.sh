#!/usr/bin/env bash
# Packed FP8 KV cache (issue 7): the MLA / store / MoE-FP8 GPU tests, memcheck on the packed cases, the demo
# model's top-1 agreement with fp8_e4m3 / fp8_e5m2 caches (kvfp8.sh), and V2-Lite bench-one-batch at a long
# context with the bf16 vs packed e4m3 cache (KV bytes per token and step times). Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 stdbuf -oL "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbed*:*MlaFused*:*MlaMha*:MlaDecodePlan*:MoeFp8Test.*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|ERR .*(e4m3|e5m2|packed)" "$OUT/tests.log" | tail -60
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedFp8Gpu*lite_decode_b8*:*MlaAbsorbedFp8Gpu*v3_multi*:*MlaAbsorbedFp8Gpu*fixture*:*Fp8KvPacked*:*StoreLatentPacked*' \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -5
OUT="$OUT/acc" timeout 120 bash scripts/device/kvfp8.sh 2>&1 | tail -6
for dt in auto fp8_e4m3; do
  timeout 150 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --kv-cache-dtype $dt --batch-size 1,8,64 --input-len 4096 --output-len 32 > "$OUT/b1b_$dt.log" 2>&1
  echo "== b1b $dt rc=$?"; grep -E "KV size|bytes per token|median|Decode|decode" "$OUT/b1b_$dt.log" | head -12
done
