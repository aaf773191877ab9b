#!/usr/bin/env bash
# Session 52: is the token box the split-K wgmma GEMM's limit at 48-64 tokens (s52e: one range, lite_o 6.4 us at 32
# tokens, 7.9 at 48, 10.3 at 64, the same kernel for 48 and 64 whose only difference is the token rows read)? The
# bench with the token boxes not loaded (DSERVE_FP8_WGMMA_DEBUG_SKIP_X=1: timing only) against loaded, one range and
# one wave of ranges.
set -u
source "$(dirname "$0")/lib.sh"
show() { grep -E "splits|wgmma " "$1" | awk '/splits/ {printf "\n%s %s sp%s", $1, $2, $5} $1=="fp8_gemm" {printf " %s=%s", $6, $7}'; echo; }
run() {
  local name=$1 filter=$2 ms=$3; shift 3
  env "$@" timeout 150 "$B/dserve_fp8_gemm_bench" --filter "$filter" --ms "$ms" > "$OUT/$name.log" 2>&1
  echo "== $name ($*) rc=$?"; show "$OUT/$name.log" | grep -v '^$'
}
run one lite_ 32,48,64 DSERVE_FP8_WGMMA_CTAS=1
run one_skip lite_ 32,48,64 DSERVE_FP8_WGMMA_CTAS=1 DSERVE_FP8_WGMMA_DEBUG_SKIP_X=1
run wave lite_ 32,64 DSERVE_FP8_WGMMA_MIN_BLOCKS=4
run wave_skip lite_ 32,64 DSERVE_FP8_WGMMA_MIN_BLOCKS=4 DSERVE_FP8_WGMMA_DEBUG_SKIP_X=1
run v3_skip "q_" 32,64 DSERVE_FP8_WGMMA_CTAS=1 DSERVE_FP8_WGMMA_DEBUG_SKIP_X=1
