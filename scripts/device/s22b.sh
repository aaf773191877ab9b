#!/usr/bin/env bash
# Session 22, call 2: the transposed MLA decode kernel's in-cluster split merge: the MLA GPU tests, memcheck on the
# cluster cases, dserve_mla_bench with and without it (DSERVE_MLA_CLUSTER=0) alternating, the 1 x 32K / 8 x 4K
# timelines with it.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*Mla*' > "$OUT/mla_tests.log" 2>&1
echo "== mla tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|tests ran" "$OUT/mla_tests.log" | head -30
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedGpu*t16*:*MlaAbsorbedGpu*m16_h8_b5*:*MlaAbsorbedGpu*m16_h13*:*MlaDecodeT16*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for cfg in base DSERVE_MLA_CLUSTER=0 base DSERVE_MLA_CLUSTER=0; do
  envs=(); [ "$cfg" = base ] || envs=($cfg)
  env "${envs[@]}" timeout 120 "$B/dserve_mla_bench" "$OUT/mla_$cfg.csv" > "$OUT/mla_$cfg.log" 2>&1
  echo "== mla_bench $cfg rc=$?"; grep -E "^mla_decode" "$OUT/mla_$cfg.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s \([0-9.]+x slower\)//'
done
for args in "" "8 4096 16" "64 4096 16"; do
  for cfg in base DSERVE_MLA_COMBINE_EARLY=1; do
    envs=(); [ "$cfg" = base ] || envs=($cfg)
    env "${envs[@]}" timeout 60 "$B/dserve_mla_trace" $args > "$OUT/trace.log" 2>&1
    echo "== trace $cfg [$args] rc=$?"; grep -vE "^ *(tile [12]|tile 1:)" "$OUT/trace.log" | head -40
  done
done
