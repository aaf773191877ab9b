#!/usr/bin/env bash
# Session 21, call 3: the t16 MLA decode kernel with tile 1 issued after Q (new default), the direct split-partial
# epilogue (DSERVE_MLA_T16_FLAGS bit 0) and the decode q0 shortcut (bit 1), with and without the combine's early
# trigger: timeline + dserve_mla_bench; GPU tests and memcheck on the MLA cases.
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*MlaAbsorbed*:*MlaDecode*:*MlaFused*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$OUT/tests.log" | tail -5
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedGpu*t16*:*MlaAbsorbedGpu*lite_decode_b8*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for cfg in base DSERVE_MLA_T16_FLAGS=2 DSERVE_MLA_T16_FLAGS=1 DSERVE_MLA_T16_FLAGS=0 DSERVE_MLA_COMBINE_EARLY=1 \
           "DSERVE_MLA_COMBINE_EARLY=1 DSERVE_MLA_T16_FLAGS=0" "DSERVE_MLA_COMBINE_EARLY=1 DSERVE_MLA_T16_EARLY=2"; do
  envs=(); [ "$cfg" = base ] || envs=($cfg)
  tag=${cfg//[^A-Za-z0-9]/_}
  echo "######## $cfg"
  env "${envs[@]}" timeout 60 "$B/dserve_mla_trace" > "$OUT/trace_$tag.log" 2>&1
  echo "== trace rc=$?"; grep -vE "^ *[0-9]+ \|" "$OUT/trace_$tag.log" | grep -vE "^launch|^trace:"
  env "${envs[@]}" MLA_BENCH_SHAPES=1x32768x16,1x16384x16,8x4096x16 MLA_BENCH_ALT=0 timeout 100 "$B/dserve_mla_bench" "$OUT/mla_$tag.csv" > "$OUT/mla_$tag.log" 2>&1
  echo "== mla_bench rc=$?"; grep -E "^mla_decode" "$OUT/mla_$tag.log" | sed -E 's/; naive.*//'
done
timeout 150 "$B/dserve_mla_bench" "$OUT/mla_all.csv" > "$OUT/mla_all.log" 2>&1
echo "== mla_bench all rc=$?"; grep -E "^mla_decode" "$OUT/mla_all.log" | sed -E 's/; naive.*//'
