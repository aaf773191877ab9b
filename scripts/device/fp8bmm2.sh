#!/usr/bin/env bash
# Issue 7: the absorbed FP8 products' cost against the bf16 ones (dserve_kernel_bench --filter bmm_heads: V2-Lite
# and V3 heads, T = 1 / 8 / 64, d2d-copy baselines) and the FP8 fixture suites with the committed v3_fp8_mla128.
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 "$B/dserve_kernel_bench" --filter 'bmm_heads' --csv "$OUT/bmm.csv" > "$OUT/bmm.log" 2>&1
echo "== kernel bench rc=$?"; cut -d, -f1-12 "$OUT/bmm.csv" | head -30
timeout 200 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='Fp8FixtureAbsorbed.*:Fixtures/Fp8FixtureGpu.*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "FP8FIXTURE (absorbed|gpu native)|^\[  (PASSED|FAILED)|FAILED  \]|Failure" "$OUT/tests.log" | head -30
