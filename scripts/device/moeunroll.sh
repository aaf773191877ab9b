#!/usr/bin/env bash
# Experiment (issue 6): the MoE decode kernel's down product with a one-round staging area sized to K
# (default: 6 chunks per warp at V2-Lite's K = 1408) vs the former 8 (DSERVE_MOE_SMALL_UNROLL=8): MoE
# consistency tests, the kernel bench's moe_layer rows and bench-one-batch batch 1 / 8 on V2-Lite, both ways.
set -u
source "$(dirname "$0")/lib.sh"
timeout 120 "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeGrouped*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "PASSED|FAILED" "$OUT/tests.log" | tail -5
for u in 8 auto; do
  env DSERVE_MOE_SMALL_UNROLL=$u timeout 60 "$B/dserve_kernel_bench" --filter moe_layer --csv "$OUT/k$u.csv" > "$OUT/k$u.log" 2>&1
  echo "== kbench unroll=$u rc=$?"; cut -d, -f1-4,11 "$OUT/k$u.csv" 2>/dev/null | grep -v "^op"
  env DSERVE_MOE_SMALL_UNROLL=$u timeout 100 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 1,8 --input-len 256 --output-len 32 > "$OUT/b$u.log" 2>&1
  echo "== b1b unroll=$u rc=$?"; grep -E "median" "$OUT/b$u.log"
done
