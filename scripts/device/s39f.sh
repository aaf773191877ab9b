#!/usr/bin/env bash
# Session 39, sixth call (~340 s): the wgmma walk at 16 token columns (wgmma m64n16k32: 9-16 rows an expert, batch
# 9-16) and K up to 7168 (V3's gate|up: a tile's token rows staged whole, 56 KB at 8 columns). (1) WgmmaWalk* (now
# every decode shape at 1 / 5 / 12 / 16 rows, the ops at up to 16 tokens) and memcheck on them; (2) the GPU suite;
# (3) A/B FP8 V2-Lite b1 / b8 / b16 two rounds new vs mma (DSERVE_MOE_FP8_WGMMA=0); (4) V3-shaped FP8 five layers
# b1 / b8 / b16 one round.
# Prediction: V2-Lite b16 -5 to -8% (the n8 gain at b8 was 8%); V3 b1 -2 to -4% (gate|up 0.9 of the read floor in the
# probe); V3 b16 unsure (one CTA an SM at 160 KB).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run wgmma 200 'MoeFp8Test.WgmmaWalk*'
grep -E "MOEFP8WGMMA|Failure|through the ops" "$OUT/wgmma.log" | grep -v "^ERR" | head -30
grep -E "^ERR .*(v3 gate_up|rows 1[26]|T 1[26])" "$OUT/wgmma.log" | head -20
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 200 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.WgmmaWalk*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_BATCHES=1,8,16 AB_KINDS=fp8 AB_ROUNDS=2 AB_BINS="new mma" AB_CFG_mma=DSERVE_MOE_FP8_WGMMA=0 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_BATCHES=1,8,16 AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BINS="new mma" \
  AB_CFG_mma=DSERVE_MOE_FP8_WGMMA=0 bash "$D/abbin.sh"
