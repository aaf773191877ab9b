#!/usr/bin/env bash
# The split combine fused with the W_UV product (kernels::launch_mla_combine_vc, issue 6): its GPU test under
# memcheck, then bench-one-batch A/B (V2-Lite dummy, input 256 / output 32, batch 1 / 4 / 8; bf16 and
# --quantization fp8) against DSERVE_MLA_COMBINE_VC=0 (combine kernel + cuBLASLt bmm). Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedVc*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED|^ERR" "$OUT/memcheck.log" | tail -10
for extra in "" "--quantization fp8"; do
  AB_EXTRA="$extra" AB_BATCHES=${CVC_BATCHES:-1,4,8} AB_CONFIGS="${CVC_CONFIGS:-base DSERVE_MLA_COMBINE_VC=0 base}" \
    bash "$(dirname "$0")/ab.sh"
done
