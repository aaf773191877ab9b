#!/usr/bin/env bash
# Session 65: the MHA prefill's mask test hoisted out of the unrolled score loops and the scale folded into the
# exponent's FFMA (s65c's source page: per-pair branches around the mask drew 29% of the stall samples), DSA-masked
# launches in their own kernels: consistency + memcheck, kernel bench and V3 / V3.2 4 layers prefill against main's
# binaries ($B/main) in the same call, and the new kernel's source page.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run mha 120 '*MlaMha*'
memcheck_run mha_mc 100 '*MlaMhaGpu*'
kbench_ab kbench mla_prefill "^mla_prefill|TMA producer:|^ceiling"
v3_cut_config "$OUT/v3.json" 4
v32_config "$OUT/v32.json" 4
for round in 1 2; do
  prefill_run v3_32k_new$round "$OUT/v3.json" 32768
  B=$B/main prefill_run v3_32k_main$round "$OUT/v3.json" 32768
done
prefill_run v3_8k_new "$OUT/v3.json" 8192
B=$B/main prefill_run v3_8k_main "$OUT/v3.json" 8192
for round in 1 2; do
  prefill_run v32_8k_new$round "$OUT/v32.json" 8192
  B=$B/main prefill_run v32_8k_main$round "$OUT/v32.json" 8192
done
prefill_run v32_8k_new_k64 "$OUT/v32.json" 8192 DSERVE_MLA_PREFILL_KEYS=64
prefill_run v32_32k_new "$OUT/v32.json" 32768
B=$B/main prefill_run v32_32k_main "$OUT/v32.json" 32768
ncu_source_page mha mla_prefill_tma_kernel "$B/dserve_kernel_bench" --filter 'mla_prefill v3 tokens=4096'
