#!/usr/bin/env bash
# Session 52: the split-K wgmma FP8 GEMM as one K range (s52d: no split beat every split policy on V2-Lite's shapes;
# at 32 tokens it beats cuBLASLt, at 64 it loses) with one or two wgmma chains a k step (DSERVE_FP8_WGMMA_CHAINS=2:
# the token halves as independent chains). Consistency cases under both, the bench on V2-Lite's and V3's shapes at
# 24-64 tokens, then bench-one-batch V2-Lite FP8 at 24 / 32 / 48 with the wgmma path up to 32 tokens (one range)
# against cuBLASLt past the small-M kernel (DSERVE_FP8_WGMMA=0), alternating.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run fp8gemm 120 'Fp8GemmGpu.*'
DSERVE_FP8_WGMMA_CHAINS=2 gtest_run fp8gemm_chains2 120 'Fp8GemmGpu.Wgmma*:Fp8GemmGpu.LinearPair*'
show() { grep -E "splits|wgmma |ours |cublaslt_fp8" "$1" | awk '/splits/ {printf "\n%s %s sp%s", $1, $2, $5} $1=="fp8_gemm" {printf " %s=%s", $6, $7}'; echo; }
run() {
  local name=$1 filter=$2 ms=$3; shift 3
  env "$@" timeout 150 "$B/dserve_fp8_gemm_bench" --filter "$filter" --ms "$ms" > "$OUT/$name.log" 2>&1
  echo "== $name ($*) rc=$?"; show "$OUT/$name.log" | grep -v '^$'
}
run lite_c1 lite_ 24,32,48,64 DSERVE_FP8_WGMMA_CTAS=1
run lite_c2 lite_ 24,32,48,64 DSERVE_FP8_WGMMA_CTAS=1 DSERVE_FP8_WGMMA_CHAINS=2
run v3_c1 "" 32,64 DSERVE_FP8_WGMMA_CTAS=1
run v3_c2 "" 32,64 DSERVE_FP8_WGMMA_CTAS=1 DSERVE_FP8_WGMMA_CHAINS=2
AB_BATCHES=24,32,48 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=DSERVE_FP8_WGMMA_CTAS=1,DSERVE_FP8_WGMMA_MAX_M=32 \
  AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=2 bash "$(dirname "$0")/abbin.sh"
