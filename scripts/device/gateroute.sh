#!/usr/bin/env bash
# The fused router + routing + grouping (Ops::moe_gate_route with DSERVE_MOE_GATE_ROUTE=1,
# kernels/moe_gate_route.cu): its GPU test (prints its isolated time next to the three launches it replaces) and
# the routing / grouping tests under compute-sanitizer memcheck, then bench-one-batch A/B (default = three
# launches) in bf16 and FP8. Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
D=$(dirname "$0")
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
F=${GR_TESTS:-*FusedGateRoute*:FastKernels*Moe*}
timeout 200 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" --gtest_filter="$F" \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR SUMMARY|moe_gate_route .* us" "$OUT/memcheck.log"
timeout 100 "$B/ds_ops_cuda_gpu_test" --gtest_filter="$F" > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|moe_gate_route .* us" "$OUT/tests.log"
[ "${GR_AB:-1}" = 1 ] || exit 0
AB_BATCHES=${GR_BATCHES:-1,8,64} AB_CONFIGS="base DSERVE_MOE_GATE_ROUTE=1" OUT=$OUT bash "$D/ab.sh"
AB_BATCHES=1,8 AB_EXTRA="--quantization fp8" AB_CONFIGS="base DSERVE_MOE_GATE_ROUTE=1" OUT=$OUT bash "$D/ab.sh"
