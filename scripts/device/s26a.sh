#!/usr/bin/env bash
# Session 26, first call on the H200 (the device tool now lends nvidia-h200, not the H100): pipesuite.sh (whole GPU
# suite with DSERVE_MOE_FP8_PIPE=1, MoE timing both ways, bench-one-batch FP8 A/B), then H200 baselines: the MLA
# decode bench (copy measured in the same run) and bench-one-batch V2-Lite bf16 / fp8 at batch 1, 8, 64.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/pipe timeout 400 bash "$(dirname "$0")/pipesuite.sh"
MLA_BENCH_SHAPES=1x32768x16,64x4096x16,8x4096x16,1x4096x16 MLA_BENCH_ALT=0 timeout 45 "$B/dserve_mla_bench" > "$OUT/mla.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode|copy|device" "$OUT/mla.log" | cut -c1-220
for q in "" "--quantization fp8"; do
  timeout 120 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 1,8,64 --input-len 256 --output-len 32 $q > "$OUT/bob_${q:+fp8}.log" 2>&1
  echo "== bench-one-batch ${q:-bf16} rc=$?"; grep -E "^(Prefill\.|Decode\.  median)" "$OUT/bob_${q:+fp8}.log"
done
