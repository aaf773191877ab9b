#!/usr/bin/env bash
# Session 52: the token boxes are not the wgmma GEMM's limit at 64 tokens (s52f). Times at 32 tokens are ~6.4 us for
# every V2-Lite shape (10 to 48 CTAs) and ~10.3 at 64: a fixed cost by token columns. Is it the shared memory a CTA
# takes (6 stages of 16 KB at 64 columns vs 12 KB at 32: whether a CTA fits beside the quantization launch before it,
# so PDL overlaps them)? The bench at one range with 4 stages against 6, then bench-one-batch FP8 at 48 / 64.
set -u
source "$(dirname "$0")/lib.sh"
show() { grep -E "splits|wgmma " "$1" | awk '/splits/ {printf "\n%s %s sp%s", $1, $2, $5} $1=="fp8_gemm" {printf " %s=%s", $6, $7}'; echo; }
run() {
  local name=$1 filter=$2 ms=$3; shift 3
  env "$@" timeout 150 "$B/dserve_fp8_gemm_bench" --filter "$filter" --ms "$ms" > "$OUT/$name.log" 2>&1
  echo "== $name ($*) rc=$?"; show "$OUT/$name.log" | grep -v '^$'
}
run one6 lite_ 32,48,64 DSERVE_FP8_WGMMA_CTAS=1
run one4 lite_ 32,48,64 DSERVE_FP8_WGMMA_CTAS=1 DSERVE_FP8_WGMMA_STAGES=4
run one4_pdl0 lite_ 32,64 DSERVE_FP8_WGMMA_CTAS=1 DSERVE_FP8_WGMMA_STAGES=4 DSERVE_PDL=0
run one6_pdl0 lite_ 32,64 DSERVE_FP8_WGMMA_CTAS=1 DSERVE_PDL=0
