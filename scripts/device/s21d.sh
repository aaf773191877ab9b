#!/usr/bin/env bash
# Session 21, call 4: the split combine with narrower column blocks (DSERVE_MLA_COMBINE_COLS=64|32: more blocks, fewer
# partial bytes each) with and without its early trigger; MLA GPU tests under each width; timeline + dserve_mla_bench.
set -u
source "$(dirname "$0")/lib.sh"
for cols in 64 32; do
  DSERVE_MLA_COMBINE_COLS=$cols timeout 150 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*MlaAbsorbed*:*MlaDecode*:*MlaFused*' > "$OUT/tests_$cols.log" 2>&1
  echo "== tests cols=$cols rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$OUT/tests_$cols.log" | tail -5
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_MLA_COMBINE_COLS=32 timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedGpu*t16*:*MlaAbsorbedGpu*lite_decode_b8*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for cfg in base DSERVE_MLA_COMBINE_COLS=64 DSERVE_MLA_COMBINE_COLS=32 "DSERVE_MLA_COMBINE_COLS=32 DSERVE_MLA_COMBINE_EARLY=1" \
           "DSERVE_MLA_COMBINE_COLS=64 DSERVE_MLA_COMBINE_EARLY=1" "DSERVE_MLA_COMBINE_COLS=32 DSERVE_MLA_COMBINE_EARLY=1 DSERVE_MLA_T16_EARLY=2" \
           "DSERVE_MLA_COMBINE_COLS=32 DSERVE_MLA_T16_EARLY=2"; do
  envs=(); [ "$cfg" = base ] || envs=($cfg)
  tag=${cfg//[^A-Za-z0-9]/_}
  echo "######## $cfg"
  env "${envs[@]}" timeout 60 "$B/dserve_mla_trace" > "$OUT/trace_$tag.log" 2>&1
  echo "== trace rc=$?"; grep -E "per decode|mean period|PDL wait|Q load|tile 0 landed|tile 3 landed|epilogue|block total" "$OUT/trace_$tag.log"
  grep -E "^ *(9|10) \|" "$OUT/trace_$tag.log"
  env "${envs[@]}" MLA_BENCH_SHAPES=1x32768x16,1x16384x16,8x4096x16,64x512x16 MLA_BENCH_ALT=0 timeout 100 "$B/dserve_mla_bench" "$OUT/mla_$tag.csv" > "$OUT/mla_$tag.log" 2>&1
  echo "== mla_bench rc=$?"; grep -E "^mla_decode" "$OUT/mla_$tag.log" | sed -E 's/; naive.*//'
done
