#!/usr/bin/env bash
# Issue 6: the bf16 MoE pipelined tile's shapes (MoeGroupedGemmParams::tile / DSERVE_MOE_TILE) past 16 tokens:
# MoeGemmGpu.GroupedTileShapesAgree (bits agree, timed per shape), then V2-Lite bf16 bench-one-batch decode at
# batch 32 / 64 / 128 / 256 (input 512, output 32) per tile (TILES, default: the rule, 5 = the old shape, 3).
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeGemmGpu.*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|MOETILE " "$OUT/tests.log" | tail -80
for t in ${TILES:-0 5 3}; do
  env DSERVE_MOE_TILE=$t timeout 100 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 32,64,128,256 \
    --input-len 512 --output-len 32 > "$OUT/b1b_tile$t.log" 2>&1
  echo "== bf16 tile=$t rc=$? decode b32/b64/b128/b256: $(grep -E "^Decode\.  median" "$OUT/b1b_tile$t.log" | awk "{print \$4}" | tr '\n' ' ')"
done
