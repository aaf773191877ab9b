#!/usr/bin/env bash
# Issue 7: the FP8 MoE pipelined tile's shapes (MoeFp8GemmParams::tile / DSERVE_MOE_FP8_TILE) past 16 tokens:
# MoeFp8Test.GroupedTileShapesAgree (bits agree, timed per shape at V2-Lite / V3 expert shapes, 64 / 256 tokens),
# then V2-Lite FP8 bench-one-batch decode at batch 32 / 64 / 128 (input 512, output 32) per tile, same run.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.GroupedTileShapesAgree:MoeFp8Test.CapturedInGraph:MoeFp8Test.MatchesCpuSmallDims' \
  > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|MOEFP8TILE " "$OUT/tests.log" | tail -60
for t in ${TILES:-0 5}; do
  env DSERVE_MOE_FP8_TILE=$t timeout 100 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 32,64,128,256 \
    --input-len 512 --output-len 32 > "$OUT/b1b_tile$t.log" 2>&1
  echo "== tile=$t rc=$? decode b32/b64/b128/b256: $(grep -E "^Decode\.  median" "$OUT/b1b_tile$t.log" | awk "{print \$4}" | tr '\n' ' ')"
done
