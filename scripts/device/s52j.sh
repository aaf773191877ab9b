#!/usr/bin/env bash
# Session 52, the final tree: the wgmma FP8 GEMM at 33-64 tokens by default (s52i: at 32 it lost 2% on V2-Lite). The
# FP8 GEMM cases, then bench-one-batch V2-Lite FP8 at 32 / 48 / 64 (input 256) and the V3-shaped 3-layer FP8 model
# at 48 / 64, the default against DSERVE_FP8_WGMMA=0, alternating; the FP8 GEMM bench on V2-Lite's shapes at 48 / 64.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run fp8gemm 150 'Fp8GemmGpu.*:*Fp8Fixture*'
grep -E "^\[  FAILED|Failure" "$OUT/fp8gemm.log" | head
AB_BATCHES=32,48,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=2 \
  bash "$(dirname "$0")/abbin.sh"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base \
  AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=1 OUT=$OUT/v3 bash "$(dirname "$0")/abbin.sh"
timeout 100 "$B/dserve_fp8_gemm_bench" --filter lite_ --ms 48,64 --csv "$OUT/lite.csv" > "$OUT/lite.log" 2>&1
echo "== bench lite rc=$?"
grep -E "^fp8_gemm" "$OUT/lite.log" | awk '{print $2, $3, $6, $7, $11, $12}'
