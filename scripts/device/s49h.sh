#!/usr/bin/env bash
# Session 49, eighth call (binaries dserve, ds_ops_cuda_gpu_test; models/ carried, tests/fixtures not): the GemmSmallM
# tests under memcheck (the long-K rounds of 12); the engine-side input checks on CUDA (engine_checks_cuda.py: a
# 10^9 running limit capped by the memory plan's rows and the pool, refusals of a context past the model and caches
# past memory); the serving engine tests on CUDA (server_engine_test.py).
set -u
source "$(dirname "$0")/lib.sh"
memcheck_run memcheck_gemm 120 'GemmSmallM*'
timeout 200 python3 scripts/device/engine_checks_cuda.py "$PWD/$B/dserve" models/dserve-demo \
  tests/data/configs/deepseek-v2-lite.json 2>&1 | tee "$OUT/engine_checks.log" | grep CHECK
DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" timeout 150 python3 tests/server/server_engine_test.py \
  "$PWD/$B/dserve" > "$OUT/server_engine_test.log" 2>&1
echo "== server_engine_test on CUDA rc=$?"; tail -3 "$OUT/server_engine_test.log"
