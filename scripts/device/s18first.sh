#!/usr/bin/env bash
# Session 18's first call: the whole GPU suite on wip/s18 (register routing past 16 tokens, the prep kernel's
# metadata before the PDL wait, the one-round combine_vc merge), memcheck on the changed kernels' tests, then
# bench-one-batch batch 1 / 8 / 64 / 256 alternating main's binary, wip/s18's, and wip/s18 without the combine_vc
# change (dserve_nocvc).
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
F='MoeGroupedTest.RoutePermute*:MoeGroupedTest.FusedGateRoute*:MlaAbsorbedVc*:MlaFused*:*StoreLatent*:*AbsorbQ*'
timeout 200 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" --gtest_filter="$F" \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"
grep -E "ERROR SUMMARY|tests ran|^\[  PASSED|^\[  FAILED" "$OUT/memcheck.log" | tail -6
AB_BATCHES=1,8,64,256 AB_BINS="dserve_main dserve dserve_nocvc" bash "$(dirname "$0")/abbin.sh"
