#!/usr/bin/env bash
# Session 66: two batch-1 decode fixes from s65g's source pages, A/B against main's binaries ($B/main = fd85cc7):
# the FP8 wgmma walk loads each block's scales one fold ahead (moe_wgmma.cu; 19% of a step's samples sat on the scale
# product), and the absorb prep's product unrolled per token bucket 1 / 2 / 4 / 8 (mla_fused.cu; 24-28%
# no_instruction). Consistency + memcheck, the walk's own timing line, V2-Lite FP8 / bf16 and V3-shaped FP8 decode
# alternating new / main, then the two kernels' source pages again. Binaries: dserve, ds_ops_cuda_gpu_test (~250 s).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run ops 200 '*MoeFp8*:*Fp8Fixture*:*MlaFused*'
grep -E "^MOEFP8WGMMA" "$OUT/ops.log" | head -8
B=$B/main gtest_run ops_main 100 '*MoeFp8Test.WgmmaWalkMatchesTheWalk*'
grep -E "^MOEFP8WGMMA" "$OUT/ops_main.log" | head -8
memcheck_run mc 150 '*MoeFp8Test.WgmmaWalk*:*MlaFused*'
for round in 1 2; do
  b1b_run fp8_new$round --quantization fp8 --batch-size 1 8 --output-len 32
  B=$B/main b1b_run fp8_main$round --quantization fp8 --batch-size 1 8 --output-len 32
done
b1b_run bf16_new --batch-size 1 --output-len 32
B=$B/main b1b_run bf16_main --batch-size 1 --output-len 32
v3_config "$OUT/v3.json" 4
for round in 1 2; do
  decode_run v3_new$round "$OUT/v3.json" --batch-size 1 8 --output-len 32
  B=$B/main decode_run v3_main$round "$OUT/v3.json" --batch-size 1 8 --output-len 32
done
ncu_source_page walk_src 'moe_wgmma_walk' "$B/dserve" bench-one-batch --device cuda \
  --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 1 \
  --input-len 256 --output-len 2 --disable-cuda-graph
ncu_source_page prep_src 'mla_absorb_prep' "$B/dserve" bench-one-batch --device cuda \
  --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 1 \
  --input-len 256 --output-len 2 --disable-cuda-graph
