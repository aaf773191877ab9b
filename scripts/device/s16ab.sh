#!/usr/bin/env bash
# Session 16: decode switches against the default after the pre-wait kernels: DSERVE_MOE_FUSED_SHARED=1 (the shared
# expert added inside the routed combine) and DSERVE_MOE_ROUTE_PERMUTE=1 (routing and grouping in one launch):
# their tests + memcheck, then bench-one-batch V2-Lite alternating (bf16 batch 1 / 8 each alone and together, bf16
# batch 64 / 256 and FP8 batch 1 / 8 both together). S16_PART=tests|small|large|fp8 runs one part. Logs: $OUT/*.log.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=$B/ds_ops_cuda_gpu_test
F=DSERVE_MOE_FUSED_SHARED=1 R=DSERVE_MOE_ROUTE_PERMUTE=1
part() { [ -z "${S16_PART:-}" ] || [ "$S16_PART" = "$1" ]; }
if part tests; then
  timeout 120 "$T" --gtest_filter='MoeGrouped*:MoeFp8*Shared*' > "$OUT/tests.log" 2>&1
  echo "== MoeGrouped*:MoeFp8*Shared* rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|moe_route_permute" "$OUT/tests.log"
  timeout 90 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$T" \
    --gtest_filter='MoeGroupedTest.RoutePermute*' > "$OUT/memcheck.log" 2>&1
  echo "== memcheck RoutePermute rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tail -1
fi
part small && AB_BATCHES=1,8 AB_CONFIGS="base $F $R $F,$R base $F $R $F,$R" bash "$(dirname "$0")/ab.sh"
part large && AB_BATCHES=64,256 AB_CONFIGS="base $F,$R base $F,$R" bash "$(dirname "$0")/ab.sh"
part fp8 && AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base $F,$R base $F,$R" bash "$(dirname "$0")/ab.sh"
exit 0
