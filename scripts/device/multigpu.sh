#!/usr/bin/env bash
# Multi-GPU tensor parallelism (session 59, written before any multi-GPU machine was lent): the NCCL cases of
# ds_dist_cuda_gpu_test (MultiGpu*: every rank's all-reduce the same sum; the CUDA engine at --tp-size 2, with
# graphs and eager, and --dp-size 2 DP attention, against one GPU on the v2_lite / v3 fixtures), then the DeepSeek-V3 config cut to
# 4 layers (dummy block-FP8 weights, ~36 GB) served at --tp 1, --tp 2 and --tp 2 --dp 2 --enable-dp-attention: bench-serving random-ids
# 128 in / 128 out at concurrency 1 and 16. Run on
# nvidia-h100-x2 (or larger) as `all.sh multigpu:400`. Logs under $OUT.
set -u
source "$(dirname "$0")/lib.sh"
nvidia-smi -L
nvidia-smi topo -m | head -12
NCCL_DEBUG=WARN timeout 300 "$B/ds_dist_cuda_gpu_test" --gtest_filter='MultiGpu*:*/MultiGpu.*' > "$OUT/multigpu_test.log" 2>&1
echo "== multigpu_test rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/multigpu_test.log" | tr '\n' ' ')"
grep -E "tokens compared|NCCL|FAILED|Failure|rror" "$OUT/multigpu_test.log" | head -30
v3_config "$OUT/v3_4.json" 4
port=31300
for tp in 1 2 2dp; do
  port=$((port + 1))
  par=(--tp-size ${tp%dp})
  [ "$tp" = 2dp ] && par+=(--dp-size 2 --enable-dp-attention)
  timeout 200 $B/dserve serve --device cuda --model-path "$OUT/v3_4.json" --load-format dummy \
    --skip-tokenizer-init --port $port "${par[@]}" --max-running-requests 32 \
    --cuda-graph-max-bs 32 > "$OUT/serve_tp$tp.log" 2>&1 &
  pid=$!
  wait_ready "$OUT/serve_tp$tp.log" $pid 150
  grep -E "ready|rror|NCCL|graphs|tensor parallel" "$OUT/serve_tp$tp.log" | head -6
  for conc in 1 16; do
    echo "== tp $tp concurrency $conc"
    bench_random $port $conc 128 128
  done
  kill $pid; wait $pid 2>/dev/null
done
