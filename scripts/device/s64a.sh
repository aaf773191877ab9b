#!/usr/bin/env bash
# Session 64's second call: (1) the two GPU failures of s64's first call re-run after their fixes (the find_bucket fold
# reverted again: CudaGraphEngine.GreedyMatchesEager/v32 three times; FixtureGpuChunks with its floor-based check);
# (2) the MHA prefill's overlapped schedule (DSERVE_MLA_PREFILL_OVERLAP=1: S(kt) issued, P V(kt - 1) beside the
# softmax of tile kt, four 64-key stages): its consistency cases, memcheck, the kernel bench and V3 prefill A/Bs.
# Binaries: ds_ops_cuda_gpu_test, dserve_kernel_bench, dserve (~300 s: all.sh s64a:420).
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*GreedyMatchesEager*' --gtest_repeat=3 > "$OUT/graph_eager.log" 2>&1
echo "== graph_eager rc=$? $(grep -cE '^\[       OK' "$OUT/graph_eager.log") ok, $(grep -cE '^\[  FAILED  \].*ms\)' "$OUT/graph_eager.log") failed"
gtest_run chunks_mha 150 '*FixtureGpuChunks*:*MlaMha*:*IndexerTopk*'
grep -E "FIXTURE v3 (one-pass|chunked)|mha (wgmma )?(keys|kernel).*overlapped" "$OUT/chunks_mha.log" | head -20
memcheck_run mha_mc 120 '*MlaMhaGpu*'
timeout 120 "$B/dserve_kernel_bench" --filter mla_prefill > "$OUT/kbench.log" 2>&1
echo "== kbench rc=$?"; grep -E "^mla_prefill|^  mla prefill" "$OUT/kbench.log"
v3_cut_config "$OUT/v3.json" 4
for round in 1 2; do
  prefill_run v3_32k_ov$round "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_OVERLAP=1
  prefill_run v3_32k_def$round "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_OVERLAP=0
done
prefill_run v3_8k_ov "$OUT/v3.json" 8192 DSERVE_MLA_PREFILL_OVERLAP=1
prefill_run v3_8k_def "$OUT/v3.json" 8192 DSERVE_MLA_PREFILL_OVERLAP=0
