#!/usr/bin/env bash
# Run record: the 8-rows-a-block switch (MlaDecodeParams::t16_rows, DSERVE_MLA_T16_ROWS) was in this call's binaries only, measured (a tie in the model, 1 x 32K +57%), and not landed (BENCHMARKS.md, Session 45); the epilogue's trace slots 32 / 33 stayed.
# Session 45, first call (~330 s; binaries dserve, ds_ops_cuda_gpu_test, dserve_mla_bench, dserve_mla_trace): the
# transposed MLA decode kernel with 8 query rows a block (MlaDecodeParams::t16_rows / DSERVE_MLA_T16_ROWS=8: twice
# the blocks share each tile at batch 1): (1) the MLA GPU tests (the new rows=8 forced-split cases); (2) per-block
# timelines and dserve_mla_bench at 1 x 288 and 1 x 32K, 16 / 8 rows; (3) bench-one-batch A/B two rounds bf16 / FP8
# b1 / b8; (4) bf16 b1 under DSERVE_GRAPH_TIMING=1 (graph vs the gap between replays).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run mla 150 'MlaAbsorbed*:MlaDecode*:MlaPlan*'
for rows in 16 8; do
  for args in "1 288 16" "8 288 16" "1 32768 16"; do
    DSERVE_MLA_T16_ROWS=$rows timeout 60 "$B/dserve_mla_trace" $args > "$OUT/trace_r${rows}_${args// /_}.log" 2>&1
    echo "== trace rows $rows [$args] rc=$?"; grep -vE "^ *[0-9]+ +[0-9]" "$OUT/trace_r${rows}_${args// /_}.log" | head -40
  done
  DSERVE_MLA_T16_ROWS=$rows MLA_BENCH_SHAPES=1x288x16,8x288x16,1x32768x16 timeout 100 "$B/dserve_mla_bench" \
    "$OUT/mla_r$rows.csv" > "$OUT/mla_r$rows.log" 2>&1
  echo "== mla_bench rows $rows rc=$?"; grep -E "^mla_decode|splits" "$OUT/mla_r$rows.log" | head -20
done
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new r8" AB_CFG_r8=DSERVE_MLA_T16_ROWS=8 bash "$D/abbin.sh"
DSERVE_GRAPH_TIMING=1 timeout 100 "$B/dserve" bench-one-batch --device cuda \
  --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 1 --input-len 256 \
  --output-len 64 > "$OUT/timing.log" 2>&1
echo "== graph timing rc=$?"; grep -E "Decode\.  median|CUDA graph timing" "$OUT/timing.log"
