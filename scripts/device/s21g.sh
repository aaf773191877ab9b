#!/usr/bin/env bash
# Session 21's last call (models/ carried, tests/fixtures/ left behind): the fixture-free MLA GPU tests on the final
# code, dserve_mla_bench of session 20's kernels (dserve_mla_bench_old: f889a50's mla_decode*.cu linked into this
# bench) against this session's, alternating, plus the timeline; the serving tests and bench-accuracy on CUDA; the
# bench-one-batch table (bf16 batch 1 / 8 / 64 / 256, FP8 batch 1 / 8 / 64).
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/mla GTEST_FILTER='MlaAbsorbedVc.*:Cases/MlaAbsorbedGpu.*:MlaDecodeT16.*' SUITE_LIMIT=120 \
  bash "$(dirname "$0")/gpusuite.sh"
for rep in 0 1; do
  for bin in dserve_mla_bench_old dserve_mla_bench; do
    MLA_BENCH_SHAPES=1x32768x16,8x4096x16,64x4096x16,1x4096x16,64x512x16 MLA_BENCH_ALT=0 timeout 100 "$B/$bin" \
      "$OUT/${bin}_$rep.csv" > "$OUT/${bin}_$rep.log" 2>&1
    echo "== $bin rep $rep rc=$?"; grep -E "^mla_decode" "$OUT/${bin}_$rep.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s//'
  done
done
timeout 60 "$B/dserve_mla_trace" > "$OUT/trace.log" 2>&1
echo "== trace rc=$?"; grep -vE "^ *[0-9]+ \||^launch|^trace:" "$OUT/trace.log"
SERVER_TEST_TIMEOUT=150 OUT=$OUT/server bash "$(dirname "$0")/server_cuda.sh"
OUT=$OUT/accuracy bash "$(dirname "$0")/accuracy.sh"
AB_BATCHES=1,8,64,256 AB_REPS=1 AB_BINS="dserve" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64 AB_REPS=1 AB_BINS="dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
