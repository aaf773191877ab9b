#!/usr/bin/env bash
# Packed FP8 KV cache end to end (issue 7): the decode kernel at 16 heads with the packed cache through the
# mma.sync kernel (default) and the wgmma kernel (DSERVE_MLA_M16=0) next to bf16; the demo model's top-1
# agreement (kvfp8.sh) and bench-accuracy (accuracy.sh); V2-Lite bench-one-batch at a 4096-token context with
# the bf16 vs the packed e4m3 cache. Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
for v in "bf16 auto" "fp8_e4m3 auto" "fp8_e4m3 0"; do
  set -- $v
  MLA_BENCH_CASES=24567 MLA_BENCH_KV=$1 DSERVE_MLA_M16=$([ $2 = auto ] || echo $2) timeout 100 \
    "$B/dserve_mla_bench" "$OUT/mla_$1_$2.csv" > "$OUT/mla_$1_$2.log" 2>&1
  echo "== mla_bench kv=$1 m16=$2 rc=$?"; grep -E "^mla_decode" "$OUT/mla_$1_$2.log" | sed 's/; naive.*//'
done
OUT="$OUT/acc" timeout 120 bash scripts/device/kvfp8.sh 2>&1 | tail -3
OUT="$OUT/bacc" timeout 200 bash scripts/device/accuracy.sh 2>&1 | grep -E "==|Accuracy|accuracy"
for dt in auto fp8_e4m3; do
  timeout 150 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --kv-cache-dtype $dt --batch-size 1,8,64 --input-len 4096 --output-len 32 > "$OUT/b1b_$dt.log" 2>&1
  echo "== b1b $dt rc=$?"; grep -E "KV Cache is allocated|median|^Prefill" "$OUT/b1b_$dt.log"
done
