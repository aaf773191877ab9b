#!/usr/bin/env bash
# Experiment (issue 6): grouped MoE GEMM decode tiles of 64 columns / 4 warps (default) vs 32 columns / 2 warps
# (DSERVE_MOE_DECODE_WARPS=2): MoeGrouped consistency tests under the variant, the kernel bench's moe_layer rows,
# and bench-one-batch batch 1 / 8 on V2-Lite, each both ways. Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
DSERVE_MOE_DECODE_WARPS=2 timeout 120 "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeGrouped*:*CudaGraph*' > "$OUT/tests_w2.log" 2>&1
echo "== tests (2 warps) rc=$?"; grep -E "PASSED|FAILED" "$OUT/tests_w2.log" | tail -5
for w in 4 2; do
  DSERVE_MOE_DECODE_WARPS=$w timeout 60 "$B/dserve_kernel_bench" --filter moe_layer --csv "$OUT/k$w.csv" > "$OUT/k$w.log" 2>&1
  echo "== kbench warps=$w rc=$?"; cut -d, -f1-4,11 "$OUT/k$w.csv" 2>/dev/null | grep -v "^op"
  DSERVE_MOE_DECODE_WARPS=$w timeout 100 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 1,8 --input-len 256 --output-len 32 > "$OUT/b$w.log" 2>&1
  echo "== b1b warps=$w rc=$?"; grep -E "median" "$OUT/b$w.log"
done
