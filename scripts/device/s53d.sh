#!/usr/bin/env bash
# Session 53's last call: the GPU suite on the final tree (dynamic walk tiles from 33 tokens by default), the dynamic
# tiles at batch 1 / 8 / 32 (FP8; =1 vs =0, alternating: does the default's lower bound hold?), and the wgmma FP8
# GEMM's ring at 12 stages (DSERVE_FP8_WGMMA_STAGES=12: s53c's ncu had every 64-token launch at 8.6-9.8 us whatever
# its size, 1.5-11.7 MB: latency-bound) in the kernel bench and at V2-Lite FP8 batch 48 / 64.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=150 bash "$D/gpusuite.sh"
AB_BATCHES=1,8,32 AB_KINDS="fp8" AB_BINS="st dy" AB_CFG_st=DSERVE_MOE_WALK_DYNAMIC=0 AB_CFG_dy=DSERVE_MOE_WALK_DYNAMIC=1 \
  AB_ROUNDS=2 OUT=$OUT/dyn_small bash "$D/abbin.sh"
for st in 6 12; do
  DSERVE_FP8_WGMMA_STAGES=$st timeout 40 "$B/dserve_fp8_gemm_bench" --filter lite_ --ms 48,64 > "$OUT/bench_s$st.log" 2>&1
  echo "== bench stages $st rc=$?"; awk '$6=="wgmma"' "$OUT/bench_s$st.log" | head -12
done
AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="s6 s12" AB_CFG_s6=base AB_CFG_s12=DSERVE_FP8_WGMMA_STAGES=12 \
  AB_ROUNDS=2 OUT=$OUT/stages bash "$D/abbin.sh"
