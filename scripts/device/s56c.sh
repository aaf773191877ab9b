#!/usr/bin/env bash
# Session 56's third call (binaries dserve, dserve_fp8_gemm_bench; ~250 s): the cover mode's evidence. (1) The kernel
# bench at 24 / 32 tokens with DSERVE_FP8_WGMMA_COVER=0 / 8: its "ours" (kAuto, quantization included) lines for V3's
# K-split weights then run the clustered wgmma GEMM instead of cuBLASLt. (2) The V3-shaped 3-layer model FP8 at batch
# 20 / 32: default vs the cover mode, three rounds alternating (s56a: -0.4 to -0.8% at 24 / 32, near the noise).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for c in 0 8; do
  DSERVE_FP8_WGMMA_COVER=$c timeout 90 "$B/dserve_fp8_gemm_bench" --ms 24,32 > "$OUT/bench_cov$c.log" 2>&1
  echo "== bench cover $c rc=$?"
  awk '$6=="ours" || $6=="cublaslt_fp8"' "$OUT/bench_cov$c.log" | head -60
done
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=20,32 AB_KINDS="fp8" AB_BINS="base cov" AB_CFG_base=base \
  AB_CFG_cov=DSERVE_FP8_WGMMA_COVER=8 AB_ROUNDS=3 OUT=$OUT/cover bash "$D/abbin.sh"
