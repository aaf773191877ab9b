#!/usr/bin/env bash
# The kernel table of issue 8: dserve_kernel_bench (every CUDA op at DeepSeek-V2-Lite / V3 shapes against
# ceilings and baselines measured in the same run), one process per group so a failure in one group (an op's
# DS_CHECK aborts its process) does not lose the others; then dserve_fp8_gemm_bench when it is present.
# Binaries: .devbin/kbench/ (else .devbin/). Writes $OUT/kernels.csv, $OUT/kbench.log (+ fp8_gemm.csv/.log,
# mla_gpu_test.log).
# Under 4 minutes (all.sh kbench:240).
set -u
source "$(dirname "$0")/lib.sh"
B=.devbin/kbench
[ -x "$B/dserve_kernel_bench" ] || B=.devbin
LOG=$OUT/kbench.log
: > "$LOG"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
PARTS=$(mktemp -d /tmp/kbench_parts.XXXX)

group() {  # name seconds filter
  local name=$1 secs=$2 filter=$3 start=$(date +%s)
  if [ ! -x "$B/dserve_kernel_bench" ]; then
    echo "== $name: no $B/dserve_kernel_bench" | tee -a "$LOG"
    return
  fi
  echo "== $name (filter '$filter', limit ${secs}s)" | tee -a "$LOG"
  timeout --kill-after=5 "$secs" "$B/dserve_kernel_bench" --filter "$filter" --csv "$PARTS/$name.csv" >> "$LOG" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - start )) s)" | tee -a "$LOG"
}

# Most important first; each process re-measures the ceilings (a second or two).
group moe 25 "moe_layer"
group mla_decode 20 "mla_decode"
group linear 45 "linear "
group mla_prefill 20 "mla_prefill"
group membound 25 "add_rms_norm|rope_cache|silu_mul|moe_route|moe_permute|moe_combine|log_softmax"
# Each decode weight stream's read floor next to our M = 1 linear (BENCHMARKS.md, session 14).
group weight_read 40 "weight_read v2-lite|weight_read v3 q_a|weight_read v3 kv_a|weight_read v3 shared|weight_read v3 routed"

# One CSV: the first header, then every row (ceiling rows of each process included).
first=1
for f in "$PARTS"/moe.csv "$PARTS"/mla_decode.csv "$PARTS"/linear.csv "$PARTS"/mla_prefill.csv "$PARTS"/membound.csv \
    "$PARTS"/weight_read.csv; do
  [ -s "$f" ] || continue
  if [ $first = 1 ]; then cat "$f"; first=0; else tail -n +2 "$f"; fi
done > "$OUT/kernels.csv"
echo "kernels.csv: $(grep -vc "^op,model" "$OUT/kernels.csv") rows" | tee -a "$LOG"
grep -E "FAILED|FATAL|DS_CHECK|failed case" "$LOG" | head -40

# The block-FP8 GEMM bench (helper "fp8"), when built.
if [ -x "$B/dserve_fp8_gemm_bench" ] || [ -x .devbin/dserve_fp8_gemm_bench ]; then
  F=$B/dserve_fp8_gemm_bench
  [ -x "$F" ] || F=.devbin/dserve_fp8_gemm_bench
  start=$(date +%s)
  timeout --kill-after=5 25 "$F" --csv "$OUT/fp8_gemm.csv" > "$OUT/fp8_gemm.log" 2>&1
  echo "== fp8_gemm rc=$? ($(( $(date +%s) - start )) s)" | tee -a "$LOG"
  tail -5 "$OUT/fp8_gemm.log"
else
  echo "== fp8_gemm: no dserve_fp8_gemm_bench in .devbin (skipped)" | tee -a "$LOG"
fi
# The MLA consistency tests, whose paged batches now come from ops/cuda/kernel_cases.h (shared with the bench).
T=$B/ds_ops_cuda_gpu_test
[ -x "$T" ] || T=.devbin/ds_ops_cuda_gpu_test
if [ -x "$T" ]; then
  start=$(date +%s)
  DSERVE_SOURCE_DIR=$PWD timeout --kill-after=5 20 "$T" --gtest_filter='MlaAbsorbedGpu*:MlaMhaGpu*' > "$OUT/mla_gpu_test.log" 2>&1
  echo "== mla_gpu_test rc=$? ($(( $(date +%s) - start )) s)" | tee -a "$LOG"
  grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/mla_gpu_test.log" | tail -8
fi
rm -rf "$PARTS"
exit 0
