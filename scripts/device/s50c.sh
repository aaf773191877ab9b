#!/usr/bin/env bash
# Session 50, third call (binaries dserve, ds_ops_cuda_gpu_test, dserve_mla_bench; models/ carried, the big
# tests/fixtures folders not): the persistent small-M kernel removed (GemmSmallM tests on the remaining kernels);
# the engine checks on CUDA with session 50's no-chunking check (a 100K-token prompt with --chunked-prefill-size -1
# goes in pieces of --max-prefill-tokens); server_engine_test on CUDA (SglangCommandLineTest now with
# --max-prefill-tokens 5); the MLA decode's early tiles (DSERVE_MLA_T16_EARLY=0/1/2, last measured on the H100) at
# 1 x 32K and 1 x 288 on the H200; bench-one-batch bf16 / FP8 1,8 once.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run gemm 60 'GemmSmallM*'
timeout 330 python3 scripts/device/engine_checks_cuda.py "$PWD/$B/dserve" models/dserve-demo \
  tests/data/configs/deepseek-v2-lite.json 2>&1 | tee "$OUT/engine_checks.log" | grep -E "CHECK|tail"
DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" timeout 150 python3 tests/server/server_engine_test.py \
  "$PWD/$B/dserve" > "$OUT/server_engine_test.log" 2>&1
echo "== server_engine_test on CUDA rc=$?"; tail -3 "$OUT/server_engine_test.log"
for e in 1 0 2 1 0 2; do
  DSERVE_MLA_T16_EARLY=$e MLA_BENCH_SHAPES=1x32768x16,1x288x16 MLA_BENCH_ALT=0 timeout 60 "$B/dserve_mla_bench" \
    > "$OUT/mla_early$e.log" 2>&1
  echo "== early=$e $(grep -E '^mla_decode' "$OUT/mla_early$e.log" | sed -E 's/; naive.*//; s/mla_decode kv=bf16 //' | cut -c1-110 | tr '\n' ' ')"
done
b1b_run bf16 --batch-size 1,8 --output-len 32
b1b_run fp8 --batch-size 1,8 --output-len 32 --quantization fp8
