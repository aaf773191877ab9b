#!/usr/bin/env bash
# Where a CUDA-graph decode step's time goes (issue 6): bench-one-batch (V2-Lite config, dummy bf16, input 256,
# graphs) under the CUPTI tracer (.devbin/libds_cupti_trace.so, src/profile/cupti_trace.cpp), then per step:
# wall time, kernel time, gaps, and time per kernel name. TRACE_BS (default 1), TRACE_EXTRA adds flags.
set -u
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT"
for bs in ${TRACE_BS:-1}; do
  start=$(date +%s)
  timeout 200 env DSERVE_TRACE_OUT="$OUT/trace_bs$bs.csv" LD_PRELOAD="$PWD/$B/libds_cupti_trace.so" "$B/dserve" \
    bench-one-batch --device cuda --model-path ${TRACE_MODEL:-tests/data/configs/deepseek-v2-lite.json} \
    --load-format dummy --batch-size "$bs" --input-len 256 --output-len 8 ${TRACE_EXTRA:-} > "$OUT/b1b_bs$bs.log" 2>&1
  echo "== traced bench-one-batch batch $bs rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^Decode\.  median|cupti_trace" "$OUT/b1b_bs$bs.log"
  python3 scripts/device/trace_summary.py "$OUT/trace_bs$bs.csv" ${TRACE_SUMMARY_ARGS:-} | tee "$OUT/summary_bs$bs.txt"
done
