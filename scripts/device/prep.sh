#!/usr/bin/env bash
# The one-launch absorbed-MLA inputs (kernels::launch_mla_absorb_prep, Ops::mla_store_absorb_q; issue 6): memcheck
# on its test, then bench-one-batch A/B (V2-Lite dummy, input 256 / output 32, batch 1 / 8; bf16 and
# --quantization fp8) with DSERVE_MLA_PREP=0 (store on the side stream, cuBLASLt bmm + rope copy) as the baseline.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 120 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*StoreAbsorbQ*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for extra in "" "--quantization fp8"; do
  AB_EXTRA="$extra" AB_CONFIGS="base DSERVE_MLA_PREP=0 base DSERVE_MLA_PREP=0" bash "$(dirname "$0")/ab.sh"
done
