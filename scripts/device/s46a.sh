#!/usr/bin/env bash
# Session 46, first call (~330 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): greedy sampling inside
# bench-one-batch's decode graphs with the tokens kept on the device (CudaGraphOptions::greedy_ids,
# Ops::greedy_to_store_), the greedy kernel over 1024-column chunks, the vectorised embedding: (1) the whole GPU
# suite (new: SampleGpu.GreedyToStoreMatchesCpu, CudaGraphGreedyIds.*); (2) bench-one-batch A/B two rounds bf16 / FP8
# b1 / b8 against DSERVE_BENCH_DEVICE_TOKENS=0 (sampler after the replay, tokens back to the host); (3) graph timing
# both ways; (4) bf16 b1 traces both ways, the bf16 b1 graph as Graphviz (DSERVE_GRAPH_DOT).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
grep -hE "^\[ +(OK|FAILED) +\] (SampleGpu.Greedy|CudaGraphGreedy|CudaOpsTest.Embedding)" "$OUT"/*.log "$OUT"/*/*.log 2>/dev/null | head
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new old" AB_CFG_old=DSERVE_BENCH_DEVICE_TOKENS=0 bash "$D/abbin.sh"
for dt in 1 0; do
  DSERVE_BENCH_DEVICE_TOKENS=$dt DSERVE_GRAPH_TIMING=1 timeout 100 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 1 --input-len 256 \
    --output-len 64 > "$OUT/timing_dt$dt.log" 2>&1
  echo "== graph timing device tokens $dt rc=$?"; grep -E "Decode\.  median|CUDA graph timing" "$OUT/timing_dt$dt.log"
done
DSERVE_GRAPH_DOT=$OUT/graph OUT=$OUT/trace_dt1 TRACE_BS=1 TRACE_EXTRA="" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | tail -5
DSERVE_BENCH_DEVICE_TOKENS=0 OUT=$OUT/trace_dt0 TRACE_BS=1 TRACE_EXTRA="" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | tail -5
ls -la "$OUT"
