#!/usr/bin/env bash
# Run record: DSERVE_GRAPH_HEAD (a fill kernel at the graph head) was in this call's binaries only (removed after it; BENCHMARKS.md, Session 46).
# Session 46, second call (~240 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): the graph's inputs in
# one copy (write_inputs, DSERVE_GRAPH_ONE_COPY): (1) the graph and sampling GPU tests (both copy paths); (2)
# bench-one-batch A/B two rounds bf16 / FP8 b1 / b8 against DSERVE_GRAPH_ONE_COPY=0; (3) graph timing both ways;
# (4) where the ~10 us between a replay's first and second kernel comes from: a bf16 trace with a fill kernel at the
# graph's head (DSERVE_GRAPH_HEAD=1), an FP8 trace.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run graph 200 'CudaGraph*:SampleGpu*:CudaOpsTest.Embedding'
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new two" AB_CFG_two=DSERVE_GRAPH_ONE_COPY=0 bash "$D/abbin.sh"
for oc in 1 0; do
  DSERVE_GRAPH_ONE_COPY=$oc DSERVE_GRAPH_TIMING=1 timeout 100 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 1 --input-len 256 \
    --output-len 64 > "$OUT/timing_oc$oc.log" 2>&1
  echo "== graph timing one copy $oc rc=$?"; grep -E "Decode\.  median|CUDA graph timing" "$OUT/timing_oc$oc.log"
done
DSERVE_GRAPH_HEAD=1 OUT=$OUT/trace_head TRACE_BS=1 TRACE_EXTRA="" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | grep "^=="
OUT=$OUT/trace_fp8 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | grep "^=="
