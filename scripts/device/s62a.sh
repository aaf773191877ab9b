#!/usr/bin/env bash
# Prepared in session 61 (no device time left) for the next session's first call (binaries ds_ops_cuda_gpu_test,
# dserve_kernel_bench, dserve; ~400 s: all.sh s62a:450): two opt-ins never run on a GPU. (1) The wgmma MLA prefill's split tile loads
# (DSERVE_MLA_PREFILL_SPLIT_LOADS=1: the ncu of s61g found the load loop's division / branches making ALU the busiest
# pipe and 20 of 32 threads active). (2) The indexer's prefill scores on wgmma (DSERVE_INDEXER_WGMMA=1,
# kernels/indexer_wgmma.cu: the mma.sync kernel is bound by its ldmatrix loads). Consistency cases on every kernel (+
# memcheck), the kernel bench's rows, V3 4 layers 32K prefill with / without (1), V3.2 4 layers 32K with / without
# (2). Keep each as the default if it wins (and drop the other path), else remove it.
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 $B/ds_ops_cuda_gpu_test --gtest_filter='Cases/MlaMhaGpu.*:*IndexerTopk*' > "$OUT/mha.log" 2>&1
echo "== mha rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/mha.log" | tr '\n' ' ')"
grep -E "^ERR.*(split|wgmma-multi)|Failure" "$OUT/mha.log" | head -40
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 180 "$CS" --tool memcheck $B/ds_ops_cuda_gpu_test \
  --gtest_filter='Cases/MlaMhaGpu.*lite_prefill:Cases/MlaMhaGpu.*v3_chunked:*IndexerTopk*' > "$OUT/mha_mc.log" 2>&1
echo "== mha_mc rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/mha_mc.log" | tr '\n' ' ')"
timeout 90 $B/dserve_kernel_bench --filter 'mla_prefill|indexer_prefill' 2>&1 | grep -E "mla_prefill|mla prefill|indexer"
v3_cut_config "$OUT/v3.json" 4
for split in 1 0 1 0; do prefill_run v3_32k_split$split "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_SPLIT_LOADS=$split; done
v32_config "$OUT/v32.json" 4
for w in 1 0 1 0; do prefill_run v32_32k_wgmma$w "$OUT/v32.json" 32768 DSERVE_INDEXER_WGMMA=$w; done
