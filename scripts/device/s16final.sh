#!/usr/bin/env bash
# Session 16's last call: the whole GPU suite and memcheck on the new MoE launches (fused routing and grouping, the
# shared expert added in the combine), bench-one-batch V2-Lite dummy (input 256 / output 32) at batch 1 / 8 / 64 / 256
# bf16 and --quantization fp8 (graphs) on the final binaries, and the two new defaults off vs on at batch 1 / 8.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
start=$(date +%s)
timeout 330 "$B/ds_ops_cuda_gpu_test" > "$OUT/suite.log" 2>&1
echo "== whole suite rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|moe_route_permute" "$OUT/suite.log" | tail -10
timeout 90 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeGroupedTest.RoutePermute*:MoeFp8Test.FusedShared*:MoeGroupedTest.CapturedInGraph' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) " "$OUT/memcheck.log" | tail -3
for extra in "" "--quantization fp8"; do
  B1B_EXTRA="$extra" bash "$(dirname "$0")/b1b.sh"
  cp "$OUT/b1b.log" "$OUT/b1b_$(echo "x$extra" | tr -c 'A-Za-z0-9_\n' '_').log"
done
AB_BATCHES=1,8 AB_CONFIGS="DSERVE_MOE_FUSED_SHARED=0,DSERVE_MOE_ROUTE_PERMUTE=0 base" bash "$(dirname "$0")/ab.sh"
