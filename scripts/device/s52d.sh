#!/usr/bin/env bash
# Session 52: the split-K wgmma FP8 GEMM with its scale loads all in flight at once and one fence a CTA around the
# ticket (s52c: ranges of 2 blocks at 64 token columns still ~14-25 us). Consistency cases, then
# dserve_fp8_gemm_bench on V2-Lite's shapes at 16 / 32 / 64 tokens under four settings: ranges of >= 2 (default),
# >= 8 blocks, 4 stages with >= 4 blocks, one range (no partials: the fixed cost without the split sum); V3 at >= 4.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run fp8gemm 120 'Fp8GemmGpu.*'
grep -E "^\[  FAILED|Failure" "$OUT/fp8gemm.log" | head -10
show() { grep -E "splits|wgmma |cublaslt_fp8" "$1" | awk '/splits/ {printf "\n%s %s sp%s", $1, $2, $5} $1=="fp8_gemm" {printf " %s=%s", $9, $10}'; echo; }
run() {
  local name=$1; shift
  env "$@" timeout 100 "$B/dserve_fp8_gemm_bench" --filter lite_ --ms 16,32,64 > "$OUT/$name.log" 2>&1
  echo "== $name ($*) rc=$?"; show "$OUT/$name.log"
}
run mb2 DSERVE_FP8_WGMMA_MIN_BLOCKS=2
run mb8 DSERVE_FP8_WGMMA_MIN_BLOCKS=8
run st4 DSERVE_FP8_WGMMA_STAGES=4 DSERVE_FP8_WGMMA_MIN_BLOCKS=4
run one DSERVE_FP8_WGMMA_CTAS=1
DSERVE_FP8_WGMMA_MIN_BLOCKS=4 timeout 150 "$B/dserve_fp8_gemm_bench" --ms 16,32,64 > "$OUT/v3.log" 2>&1
echo "== v3 min_blocks 4 rc=$?"; show "$OUT/v3.log" | grep -v lite_
