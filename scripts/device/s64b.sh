#!/usr/bin/env bash
# Session 64's last call: (1) CudaGraphEngine.GreedyMatchesEager with its requests queued while the engine is paused,
# three times; (2) the default MHA prefill's stall reasons (ncu metrics, V3 128 heads x 4,096), for the next session's
# choice between a TMA producer warp and out-of-phase warpgroups; (3) where a V2-Lite FP8 batch-1 decode step goes on
# the H100 (trace.sh, CUPTI; untraced on this GPU since session 60). Binaries: ds_ops_cuda_gpu_test,
# dserve_kernel_bench, dserve, libds_cupti_trace.so (~200 s: all.sh s64b:280).
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*GreedyMatchesEager*' --gtest_repeat=3 > "$OUT/graph_eager.log" 2>&1
echo "== graph_eager rc=$? $(grep -cE '^\[       OK' "$OUT/graph_eager.log") ok, $(grep -cE '^\[  FAILED  \].*ms\)' "$OUT/graph_eager.log") failed"
ncu_stalls ncu_stalls 90 mla_prefill_wgmma 'mla_prefill v3 tokens=4096'
OUT="$OUT/trace" TRACE_EXTRA="--quantization fp8" timeout 120 bash scripts/device/trace.sh 2>&1 | head -60
