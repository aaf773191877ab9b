#!/usr/bin/env bash
# CUDA graphs + device-driven grouped MoE GEMM (issue 6): the new gpu tests, the ops/fixture tests they touch,
# bench-one-batch on the DeepSeek-V2-Lite config (dummy bf16, input 256 / output 32) with and without CUDA
# graphs, and compute-sanitizer memcheck on the new consistency cases. Binaries: .devbin/graph/ (else .devbin/).
# Logs under $OUT; keeps going after a failure. Most important first; give it ~7 minutes (all.sh graph:420).
set -u
source "$(dirname "$0")/lib.sh"
B=.devbin/graph
[ -x "$B/dserve" ] || B=.devbin
T=$B/ds_ops_cuda_gpu_test
run() {  # name timeout command...
  local name=$1 secs=$2
  shift 2
  local start=$(date +%s)
  timeout --kill-after=5 "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc ($(( $(date +%s) - start )) s)"
  grep -E "^ERR |^GRAPH |^MOEBW|FAILED|PASSED|ERROR SUMMARY|Decode\.|Prefill\.|captured|rror" "$OUT/$name.log" | tail -40
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

# 1. New consistency cases (grouped MoE vs CPU, MoE captured in a graph, graph decode vs eager on fixtures).
run gpu_new 120 "$T" --gtest_filter='MoeGrouped*:*CudaGraph*'
# 1b. dserve generate through the bs-1 graph and eagerly (the two lines should match).
GEN=(generate --device cuda --model-path tests/fixtures/v3 --input-ids 5,17,300,42,7,99,123 --max-new-tokens 12
     --temperature 0 --json)
run generate 60 bash -c "'$B/dserve' ${GEN[*]}; '$B/dserve' ${GEN[*]} --disable-cuda-graph"
cat "$OUT/generate.log"
# 2. bench-one-batch, V2-Lite config, with CUDA graphs (default) and without.
CFG=tests/data/configs/deepseek-v2-lite.json
BENCH=(bench-one-batch --device cuda --model-path "$CFG" --load-format dummy --batch-size 1,8,64,256
       --input-len 256 --output-len 32)
run bench_graph 240 "$B/dserve" "${BENCH[@]}"
run bench_eager 240 "$B/dserve" "${BENCH[@]}" --disable-cuda-graph
# 3. memcheck on the new cases (graph replays included).
if command -v compute-sanitizer > /dev/null; then CS=compute-sanitizer; else CS=/usr/local/cuda/bin/compute-sanitizer; fi
run memcheck 240 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" \
  --gtest_filter='MoeGroupedTest.MatchesCpu:MoeGroupedTest.CapturedInGraph:*CudaGraph*ReplayMatchesEagerDecode/0'
# 4. Everything else in the ops binary that moe_experts / gather_context feed (ops, fixtures vs transformers).
run gpu_ops 150 "$T" --gtest_filter='CudaOpsTest.*:Fixtures/FixtureGpuTest.*'
exit 0
