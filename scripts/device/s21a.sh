#!/usr/bin/env bash
# Session 21, call 1: session 20's last commit (f889a50: sampling copy-back) on the GPU (SampleGpu, CUDA-graph
# fixture tests, server_engine_test on CUDA); then the MLA decode timeline at batch 1 x 32K (dserve_mla_trace) and
# the kernel bench for the same shape.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/tests GTEST_FILTER='SampleGpu.*:Fixtures/CudaGraph*:*MlaAbsorbedGpu*t16*' SUITE_LIMIT=150 bash "$(dirname "$0")/gpusuite.sh"
export DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1
timeout 150 python3 tests/server/server_engine_test.py "$DSERVE_BINARY" > "$OUT/engine.log" 2>&1
echo "== server_engine_test rc=$?"; tail -3 "$OUT/engine.log"
for args in "" "1 32768 16 64" "1 32768 16 96"; do
  timeout 60 "$B/dserve_mla_trace" $args > "$OUT/trace_${args// /_}.log" 2>&1
  echo "== trace [$args] rc=$?"; cat "$OUT/trace_${args// /_}.log"
done
DSERVE_PDL=0 timeout 60 "$B/dserve_mla_trace" > "$OUT/trace_nopdl.log" 2>&1
echo "== trace no PDL rc=$?"; cat "$OUT/trace_nopdl.log"
MLA_BENCH_SHAPES=1x32768x16,64x4096x16 MLA_BENCH_ALT=64,96 timeout 100 "$B/dserve_mla_bench" "$OUT/mla.csv" > "$OUT/mla.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode|alt splits|cp.async" "$OUT/mla.log"
