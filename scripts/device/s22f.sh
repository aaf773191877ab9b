#!/usr/bin/env bash
# Session 22, call 6: the transposed kernel's epilogues sharing their column totals (column_totals): MLA GPU tests,
# memcheck on the cluster cases, dserve_mla_bench of the committed kernel (dserve_mla_bench_prev: HEAD's
# mla_decode_t16.cu linked into this bench) against this one, alternating; the bench-one-batch table.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*Mla*' > "$OUT/mla_tests.log" 2>&1
echo "== mla tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|tests ran" "$OUT/mla_tests.log" | head -30
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedGpu*t16*:*MlaAbsorbedGpu*m16_h8_b5*:*MlaAbsorbedGpu*m16_h13*:*MlaDecodeT16*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for rep in 0 1; do
  for bin in dserve_mla_bench_prev dserve_mla_bench; do
    MLA_BENCH_SHAPES=1x32768x16,8x4096x16,64x4096x16,1x4096x16,64x512x16 MLA_BENCH_ALT=0 timeout 100 "$B/$bin" \
      "$OUT/${bin}_$rep.csv" > "$OUT/${bin}_$rep.log" 2>&1
    echo "== $bin rep $rep rc=$?"; grep -E "^mla_decode" "$OUT/${bin}_$rep.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s \([0-9.]+x slower\)//'
  done
done
AB_BATCHES=1,8,64,256 AB_REPS=1 AB_BINS="dserve" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64 AB_REPS=1 AB_BINS="dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
