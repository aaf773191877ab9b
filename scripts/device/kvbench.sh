#!/usr/bin/env bash
# Packed FP8 KV cache (issue 7): its GPU tests, then dserve_mla_bench over the same cases with the bf16 and the
# packed e4m3 cache (the decode kernel alone; bandwidth against a copy measured in each run); memcheck on a few
# packed cases. Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter="${KV_TESTS:-*MlaAbsorbedFp8*:*MlaFused*}" > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$OUT/tests.log" | tail -20
grep -E "^(ERR|INFO) .*(e4m3|e5m2)" "$OUT/tests.log" | head -60
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedFp8Gpu*v3_multi*:*MlaAbsorbedFp8Gpu*lite_multi*:*MlaAbsorbedFp8Gpu*m16_h13*:*MlaAbsorbedFp8Gpu*fixture_dims_e4m3' \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -5
for kv in bf16 fp8_e4m3; do
  MLA_BENCH_KV=$kv timeout 150 "$B/dserve_mla_bench" "$OUT/mla_$kv.csv" > "$OUT/mla_$kv.log" 2>&1
  echo "== mla_bench $kv rc=$?"; grep -E "^mla_decode|alt splits" "$OUT/mla_$kv.log"
done
