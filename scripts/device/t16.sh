#!/usr/bin/env bash
# The transposed MLA decode kernel (kernels/mla_decode_t16.cu, issue 6): the absorbed-attention GPU tests,
# memcheck on its cases, dserve_mla_bench over every case with it (default) and without (DSERVE_MLA_T16=0),
# then the traced kernel times (mlaprof.sh). Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/ds_ops_cuda_gpu_test" --gtest_filter="${T16_TESTS:-*MlaAbsorbed*:*MlaFused*:*MlaDecode*}" > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|^ERR .*(t16|lite|m16|sharp)" "$OUT/tests.log" | tail -40
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedGpu*t16_h4*:*MlaAbsorbedGpu*t16_h5*:*MlaAbsorbedGpu*lite_decode_b8*:*MlaAbsorbedGpu*m16_h8*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -5
for cfg in base DSERVE_MLA_T16=0; do
  envs=(); [ "$cfg" = base ] || envs=("$cfg")
  env "${envs[@]}" MLA_BENCH_SHAPES=${T16_SHAPES:-1x32768x16,1x16384x16,1x65536x16,1x4096x16,8x4096x16,64x4096x16,64x512x16} \
    MLA_BENCH_ALT=${T16_ALT:-32,64,96,132} timeout 150 "$B/dserve_mla_bench" "$OUT/mla_${cfg//[^A-Za-z0-9]/_}.csv" > "$OUT/mla_${cfg//[^A-Za-z0-9]/_}.log" 2>&1
  echo "== mla_bench $cfg rc=$?"; grep -E "^mla_decode|alt splits" "$OUT/mla_${cfg//[^A-Za-z0-9]/_}.log"
done
MLA_PROF_MODES="DSERVE_PDL=0 DSERVE_MLA_T16=0,DSERVE_PDL=0" bash scripts/device/mlaprof.sh
