#!/usr/bin/env bash
# Run in session 65 (BENCHMARKS.md); the ping-pong opt-in was then removed, so its rows now measure the default.
# Session 65, after the mask fix: FlashAttention-3's ping-pong again on the TMA MHA prefill
# (DSERVE_MLA_PREFILL_PINGPONG=1, a tie before the fix), and the indexer's q_scale folded into its head weights:
# consistency + memcheck, kernel bench, V3 / V3.2 4 layers 32K prefill A/Bs (main's binaries = 573f3fd in $B/main).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run mha 150 '*MlaMha*:*IndexerTopk*'
grep -E "pingpong" "$OUT/mha.log" | head -8
memcheck_run mha_mc 100 '*MlaMhaGpu*'
timeout 100 "$B/dserve_kernel_bench" --filter mla_prefill > "$OUT/kbench.log" 2>&1
echo "== kbench rc=$?"; grep -E "^mla_prefill|TMA producer|^ceilings" "$OUT/kbench.log"
kbench_ab kbench_idx indexer_prefill "^indexer_prefill|indexer scores alone"
v3_cut_config "$OUT/v3.json" 4
v32_config "$OUT/v32.json" 4
for round in 1 2; do
  prefill_run v3_32k_def$round "$OUT/v3.json" 32768
  prefill_run v3_32k_pp$round "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_PINGPONG=1
done
prefill_run v3_8k_def "$OUT/v3.json" 8192
prefill_run v3_8k_pp "$OUT/v3.json" 8192 DSERVE_MLA_PREFILL_PINGPONG=1
for round in 1 2; do
  prefill_run v32_32k_new$round "$OUT/v32.json" 32768
  B=$B/main prefill_run v32_32k_main$round "$OUT/v32.json" 32768
done
