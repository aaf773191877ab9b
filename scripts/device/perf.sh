#!/usr/bin/env bash
# Fast memory-bound kernels (issue 6, helper "perf"): the consistency cases of the changed kernels (new
# FastKernelsTest + the op / grouped-MoE / CUDA-graph cases), bench-one-batch on the V2-Lite config at batch
# 1 and 64, the kernel bench rows of the changed ops (+ moe_layer), and compute-sanitizer memcheck on the
# changed kernels' cases. Binaries: .devbin/perf/ (else .devbin/). Logs + perf.csv under $OUT; keeps going
# after a failure; the whole script stops itself after ~150 s (all.sh perf:170).
set -u
source "$(dirname "$0")/lib.sh"
B=.devbin/perf
[ -x "$B/ds_ops_cuda_gpu_test" ] || B=.devbin
T=$B/ds_ops_cuda_gpu_test
DEADLINE=$(( $(date +%s) + 150 ))
run() {  # name max-seconds command...: runs under min(max, time left before the deadline)
  local name=$1 secs=$2
  shift 2
  local left=$(( DEADLINE - $(date +%s) ))
  [ "$secs" -gt "$left" ] && secs=$left
  if [ "$secs" -lt 5 ]; then
    echo "== $name skipped (deadline)"
    return
  fi
  local start=$(date +%s)
  timeout --kill-after=5 "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc ($(( $(date +%s) - start )) s, limit $secs s)"
  grep -E "^ERR |FAILED|PASSED|ERROR SUMMARY|Decode\.|Prefill\.|captured|rror|Abort|DS_CHECK" "$OUT/$name.log" | tail -60
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

# 1. Consistency: the new fast-path cases first, then every op case, the grouped MoE and the graph cases.
run gpu_fast 40 "$T" --gtest_filter='FastKernelsTest.*'
run gpu_ops 40 "$T" --gtest_filter='CudaOpsTest.*:MoeGrouped*:*CudaGraph*:RmsNorm*'
# 2. Decode latency, V2-Lite config, dummy bf16, CUDA graphs (before: bs 1 5.06 ms, bs 64 29.0 ms).
run bench_one_batch 60 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
  --load-format dummy --batch-size 1,64 --input-len 256 --output-len 32 --cuda-graph-max-bs 64
# 3. The changed ops in the kernel bench (compare with /work/notes/dev/run2_kbench/kbench/kernels.csv).
if [ -x "$B/dserve_kernel_bench" ]; then
  run kbench 30 "$B/dserve_kernel_bench" \
    --filter 'add_rms_norm|rope_cache|silu_mul|moe_route|moe_permute|moe_combine|log_softmax|moe_layer' --csv "$OUT/perf.csv"
  [ -s "$OUT/perf.csv" ] && cut -d, -f1-4,11 "$OUT/perf.csv"
else
  echo "== kbench: no $B/dserve_kernel_bench"
fi
# 4. memcheck on the changed kernels' cases (skips the 4096-token MoE experts case: CPU-heavy, not new code).
if command -v compute-sanitizer > /dev/null; then CS=compute-sanitizer; else CS=/usr/local/cuda/bin/compute-sanitizer; fi
run memcheck 30 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" \
  --gtest_filter='FastKernelsTest.*:CudaOpsTest.MoeRoute:CudaOpsTest.LogSoftmax:CudaOpsTest.Rope:CudaOpsTest.RmsNormAndFusedAdd:CudaOpsTest.SiluMul:CudaOpsTest.MoeExperts-FastKernelsTest.MoeExpertsDecodeAndPrefill'
exit 0
