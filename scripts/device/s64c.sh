#!/usr/bin/env bash
# Session 64's TMA-producer MHA prefill (DSERVE_MLA_PREFILL_TMA=1: a producer warp streams each tile's five boxes through
# full / empty mbarriers, the two consumer warpgroups no longer meet at a block barrier a tile; s64b's ncu put barrier
# stalls first, 1.45 a issued instruction): consistency cases and memcheck, the kernel bench, V3 prefill A/Bs.
# Binaries: ds_ops_cuda_gpu_test, dserve_kernel_bench, dserve (~150 s: all.sh s64c:240).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run mha 100 '*MlaMha*'
grep -E "tma" "$OUT/mha.log" | head -24
memcheck_run mha_mc 100 '*MlaMhaGpu*'
timeout 100 "$B/dserve_kernel_bench" --filter mla_prefill > "$OUT/kbench.log" 2>&1
echo "== kbench rc=$?"; grep -E "^mla_prefill|^  mla prefill kernel wgmma" "$OUT/kbench.log"
v3_cut_config "$OUT/v3.json" 4
for round in 1 2; do
  prefill_run v3_32k_tma$round "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_TMA=1
  prefill_run v3_32k_def$round "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_TMA=0
done
prefill_run v3_8k_tma "$OUT/v3.json" 8192 DSERVE_MLA_PREFILL_TMA=1
prefill_run v3_8k_def "$OUT/v3.json" 8192 DSERVE_MLA_PREFILL_TMA=0
