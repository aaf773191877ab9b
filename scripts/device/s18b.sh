#!/usr/bin/env bash
# Session 18's second call: the MLA tests (and memcheck on them) with the one-round mla_combine_kernel, the MLA
# decode kernel alone (dserve_mla_bench old vs new, alternating), and bench-one-batch batch 1 / 8 / 64 alternating
# wip/s18 before the combine change (dserve_s18a), with it (dserve) and with it but without the prep kernel's
# pre-wait metadata (dserve_noprep).
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
F='Mla*:*/Mla*'
OUT=$OUT/suite GTEST_FILTER="$F" bash "$(dirname "$0")/gpusuite.sh"
timeout 200 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MlaAbsorbedVc*:Cases/MlaAbsorbedGpu.*:MlaFused*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"
grep -E "ERROR SUMMARY|^\[  PASSED|^\[  FAILED" "$OUT/memcheck.log" | tail -6
for rep in 0 1; do
  for bin in dserve_mla_bench_old dserve_mla_bench; do
    MLA_BENCH_CASES=41562 timeout 100 "$B/$bin" "$OUT/${bin}_$rep.csv" > "$OUT/${bin}_$rep.log" 2>&1
    echo "== $bin rep $rep rc=$?"
    grep -E "^mla_decode|copy" "$OUT/${bin}_$rep.log" | head -8
  done
done
AB_BATCHES=1,8,64 AB_BINS="dserve_s18a dserve dserve_noprep" bash "$(dirname "$0")/abbin.sh"
