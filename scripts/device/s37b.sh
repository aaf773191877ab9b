#!/usr/bin/env bash
# Session 37, second call (~120 s; binaries dserve, dserve_mla_bench, libds_cupti_trace.so from main 59b5145):
# where bf16 batch 1 stands before choosing the session's change. (1) bench-one-batch V2-Lite bf16 batch 1 / 8 with
# DSERVE_GRAPH_TIMING=1 (device time of input copy + graph, the gap between replays, the host launch calls);
# (2) one bf16 batch-1 MoE layer's timeline (CUPTI); (3) dserve_mla_bench at 1 x 32K and 64 x 4K, 16 heads.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for r in 1 2; do
  DSERVE_GRAPH_TIMING=1 timeout 90 "$B/dserve" bench-one-batch --device cuda --model-path \
    tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 1,8 --input-len 256 --output-len 32 \
    > "$OUT/timing_$r.log" 2>&1
  echo "== graph timing round $r rc=$?"
  grep -E "^Decode\.  median|replays, median" "$OUT/timing_$r.log" | cut -c1-260
done
OUT=$OUT/trace_bf16 TRACE_BS=1 TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | \
  sed -n '/^timeline/,$p'
MLA_BENCH_SHAPES=1x32768x16,64x4096x16 MLA_BENCH_ALT=0 timeout 45 "$B/dserve_mla_bench" > "$OUT/mla.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode|copy|device" "$OUT/mla.log" | cut -c1-220
