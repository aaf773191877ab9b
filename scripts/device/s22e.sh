#!/usr/bin/env bash
# Session 22, call 5: the cluster merge reading its own part from local shared memory: MLA GPU tests, memcheck on
# the cluster cases, dserve_mla_bench with and without the merge alternating, the merge's timeline.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*Mla*' > "$OUT/mla_tests.log" 2>&1
echo "== mla tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|tests ran" "$OUT/mla_tests.log" | head -30
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedGpu*t16*:*MlaAbsorbedGpu*m16_h8_b5*:*MlaAbsorbedGpu*m16_h13*:*MlaDecodeT16*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for cfg in base cl0 base cl0; do
  envs=(); [ "$cfg" = base ] || envs=(DSERVE_MLA_CLUSTER=0)
  env "${envs[@]}" MLA_BENCH_SHAPES=1x32768x16,8x4096x16,64x4096x16,64x512x16,1x4096x16 MLA_BENCH_ALT=0 \
    timeout 120 "$B/dserve_mla_bench" "$OUT/mla_$cfg.csv" > "$OUT/mla_$cfg.log" 2>&1
  echo "== mla_bench $cfg rc=$?"; grep -E "^mla_decode|^transposed" "$OUT/mla_$cfg.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s \([0-9.]+x slower\)//'
done
for spec in "16|1 4096 16" "2|64 512 16" "2|64 4096 16"; do
  cl=${spec%%|*}; args=${spec#*|}
  MLA_TRACE_CLUSTER=$cl timeout 60 "$B/dserve_mla_trace" $args > "$OUT/trace.log" 2>&1
  echo "== trace cluster $cl [$args] rc=$?"; grep -E "per decode|to the cluster|cluster merge|final barrier|epilogue|block total" "$OUT/trace.log"
done
