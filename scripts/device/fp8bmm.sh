#!/usr/bin/env bash
# Issue 7: the absorbed-MLA FP8 products (W_UK / W_UV from kv_b_proj in e4m3). Makes the v3_fp8_mla128 fixture
# (128-multiple MLA dims) with transformers here ($OUT/v3_fp8_mla128.tar.gz to commit), then the GPU tests of the
# products (CUDA vs CPU op consistency, memcheck, the fixture in one-token steps against transformers, the native
# fixture suite), and V2-Lite FP8 bench-one-batch with DSERVE_FP8_BMM=0 / default (batch 1 and 64, input 512).
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 300 python3 scripts/make_fixtures.py --out tests/fixtures --only v3_fp8_mla128 --summary "$OUT/summary.json" \
  > "$OUT/gen.log" 2>&1
echo "== make_fixtures rc=$?"; grep -vE "^\s*$" "$OUT/gen.log" | tail -14
tar -C tests/fixtures -czf "$OUT/v3_fp8_mla128.tar.gz" v3_fp8_mla128
timeout 200 stdbuf -oL "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='Fp8GemmGpu.AbsorbedHeadProductsMatchTheCpu:Fp8FixtureAbsorbed.*:Fixtures/Fp8FixtureGpu.*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "FP8FIXTURE|^\[  (PASSED|FAILED)|FAILED  \]|Failure|ERR .*(bmm|absorb)" "$OUT/tests.log" | head -60
DSERVE_TEST_NO_TIMING=1 timeout 90 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='Fp8GemmGpu.AbsorbedHeadProductsMatchTheCpu' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for v in 0 1; do
  env DSERVE_FP8_BMM=$v timeout 100 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 1,64 \
    --input-len 512 --output-len 32 > "$OUT/b1b_bmm$v.log" 2>&1
  echo "== fp8 bmm=$v rc=$? decode b1/b64: $(grep -E "^Decode\.  median" "$OUT/b1b_bmm$v.log" | awk "{print \$4}" | tr '\n' ' ')"
done
