#!/usr/bin/env bash
# Session 15's last call: bench-one-batch V2-Lite dummy (input 256 / output 32) at batch 1 / 8 / 64 / 256, bf16 with
# and without CUDA graphs and --quantization fp8 (graphs), on the final binaries; then the whole GPU suite.
set -u
source "$(dirname "$0")/lib.sh"
for extra in "" "--disable-cuda-graph" "--quantization fp8"; do
  B1B_EXTRA="$extra" bash "$(dirname "$0")/b1b.sh"
  cp "$OUT/b1b.log" "$OUT/b1b_$(echo "x$extra" | tr -c 'A-Za-z0-9_\n' '_').log"
done
start=$(date +%s)
timeout 290 "$B/ds_ops_cuda_gpu_test" > "$OUT/suite.log" 2>&1
echo "== whole suite rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/suite.log" | tail -8
# The decode weight streams' read floors next to our M = 1 linears, with and without the pre-wait loads.
for pw in 1 0; do
  DSERVE_SMALL_M_PREWAIT=$pw timeout 60 "$B/dserve_kernel_bench" --filter "weight_read v2-lite" \
    --csv "$OUT/weight_read_prewait$pw.csv" > "$OUT/weight_read_prewait$pw.log" 2>&1
  echo "== weight_read v2-lite DSERVE_SMALL_M_PREWAIT=$pw rc=$?"; grep -E "weight_read|linear" "$OUT/weight_read_prewait$pw.log" | head -20
done
