#!/usr/bin/env bash
# Session 20's review mends on the GPU: the sampling kernels' shared chunk scan / first-maximum helpers and the
# SampleOutputs block, the combine_vc tests' shared oracle; SampleGpu / MlaAbsorbedVc / CUDA-graph fixture tests,
# memcheck on SampleGpu, and the serving engine test on CUDA.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/tests GTEST_FILTER='SampleGpu.*:MlaAbsorbedVc.*:Fixtures/CudaGraph*' SUITE_LIMIT=150 bash "$(dirname "$0")/gpusuite.sh"
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 MEMCHECK_LIMIT=150 GTEST_FILTER='SampleGpu.*:MlaAbsorbedVc.*' \
  bash "$(dirname "$0")/gpusuite.sh"
export DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1
timeout 150 python3 tests/server/server_engine_test.py "$DSERVE_BINARY" > "$OUT/engine.log" 2>&1
echo "== server_engine_test rc=$?"; tail -3 "$OUT/engine.log"
AB_BATCHES=1,8 AB_REPS=1 AB_BINS="dserve" bash "$(dirname "$0")/abbin.sh"
