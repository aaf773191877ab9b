#!/usr/bin/env bash
# Prepared in session 61 (no device time left) for the next session's first call (binaries ds_ops_cuda_gpu_test,
# dserve_kernel_bench, dserve; ~150 s): the wgmma MLA prefill's split tile loads (DSERVE_MLA_PREFILL_SPLIT_LOADS=1,
# opt-in, never run on a GPU: the ncu of s61g found the load loop's division / branches making ALU the busiest pipe
# and 20 of 32 threads active). Consistency cases on every prefill kernel (+ memcheck on the split ones), the kernel
# bench's prefill rows, V3 4 layers 32K prefill with and without. If split loads win, make them the default (and
# drop the other loop); if not, remove them.
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 $B/ds_ops_cuda_gpu_test --gtest_filter='Cases/MlaMhaGpu.*' > "$OUT/mha.log" 2>&1
echo "== mha rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/mha.log" | tr '\n' ' ')"
grep -E "^ERR.*split|Failure" "$OUT/mha.log" | head -24
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 90 "$CS" --tool memcheck $B/ds_ops_cuda_gpu_test \
  --gtest_filter='Cases/MlaMhaGpu.*lite_prefill:Cases/MlaMhaGpu.*v3_chunked' > "$OUT/mha_mc.log" 2>&1
echo "== mha_mc rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/mha_mc.log" | tr '\n' ' ')"
timeout 90 $B/dserve_kernel_bench --filter mla_prefill 2>&1 | grep -E "mla_prefill|mla prefill"
v3_cut_config "$OUT/v3.json" 4
for split in 1 0 1 0; do prefill_run v3_32k_split$split "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_SPLIT_LOADS=$split; done
