#!/usr/bin/env bash
# Session 52: the split-K wgmma FP8 GEMM with its range's scales staged in shared memory and the split sum's loads
# batched (s52b: long-scoreboard stalls, a global round trip a block inside the chain). Consistency cases, then
# dserve_fp8_gemm_bench on V2-Lite's and V3's shapes at 8-64 tokens with the default split policy and with ranges of
# at least 4 / 8 blocks (DSERVE_FP8_WGMMA_MIN_BLOCKS), then bench-one-batch V2-Lite FP8 32 / 64 with and without.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run fp8gemm 120 'Fp8GemmGpu.*'
grep -E "^\[  FAILED|Failure" "$OUT/fp8gemm.log" | head -10
for mb in 2 4 8; do
  DSERVE_FP8_WGMMA_MIN_BLOCKS=$mb timeout 100 "$B/dserve_fp8_gemm_bench" --filter lite_ --ms 16,32,64 > "$OUT/lite_$mb.log" 2>&1
  echo "== lite min_blocks $mb rc=$?"
  grep -E "splits|wgmma |cublaslt_fp8" "$OUT/lite_$mb.log" | awk '{ if ($1=="fp8_gemm") print $2, $3, $7, $8; else print }' | paste -sd' ' | sed 's/lite_/\n/g' | sed 's/ M=[0-9]* wgmma splits/ splits/'
done
DSERVE_FP8_WGMMA_MIN_BLOCKS=4 timeout 150 "$B/dserve_fp8_gemm_bench" --ms 16,32,64 > "$OUT/v3.log" 2>&1
echo "== v3 min_blocks 4 rc=$?"
grep -E "splits|wgmma |ours |cublaslt_fp8" "$OUT/v3.log" | grep -v lite_ | awk '{ if ($1=="fp8_gemm") print $2, $3, $7, $8, $11, $12; else print }'
AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=2 \
  bash "$(dirname "$0")/abbin.sh"
