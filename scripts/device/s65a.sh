#!/usr/bin/env bash
# Run in session 65 (BENCHMARKS.md); both opt-ins were then removed, so their rows now measure the default.
# Prepared in session 64 (no device time left) for the next session, after the GPU suite (`SUITE_LIMIT=300 all.sh
# gpusuite:330 s65a:240`): the intra-warpgroup overlap on the TMA-ring MHA prefill (DSERVE_MLA_PREFILL_OVERLAP=1, 64-key
# tiles) and the warpgroups' ping-pong (DSERVE_MLA_PREFILL_PINGPONG=1), both written in session 64 and not yet run:
# their consistency cases and memcheck, the kernel bench (every form in one process: cp.async / TMA x 64 / 128 keys,
# TMA ping-pong, TMA 64 overlapped), V3 4 layers prefill A/Bs against the TMA default.
# Binaries: ds_ops_cuda_gpu_test, dserve_kernel_bench, dserve (~200 s).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run mha 100 '*MlaMha*'
grep -E "overlapped|pingpong" "$OUT/mha.log" | head -24
memcheck_run mha_mc 100 '*MlaMhaGpu*'
timeout 100 "$B/dserve_kernel_bench" --filter mla_prefill > "$OUT/kbench.log" 2>&1
echo "== kbench rc=$?"; grep -E "^mla_prefill|^  mla prefill kernel" "$OUT/kbench.log"
v3_cut_config "$OUT/v3.json" 4
for round in 1 2; do
  prefill_run v3_32k_ov$round "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_OVERLAP=1
  prefill_run v3_32k_def$round "$OUT/v3.json" 32768
done
prefill_run v3_32k_pp1 "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_PINGPONG=1
prefill_run v3_32k_pp2 "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_PINGPONG=1
prefill_run v3_32k_cpasync "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_TMA=0
prefill_run v3_8k_ov "$OUT/v3.json" 8192 DSERVE_MLA_PREFILL_OVERLAP=1
prefill_run v3_8k_def "$OUT/v3.json" 8192
# The indexer's wgmma scores: the same block barrier a tile (both warpgroups read disjoint halves of each tile, so the
# barrier only serves the cp.async ring): its stall reasons, before giving it the MHA prefill's TMA producer form.
ncu_stalls ncu_indexer_stalls 90 indexer_scores_wgmma 'indexer_prefill v3.2 batch=1 context=8192'
