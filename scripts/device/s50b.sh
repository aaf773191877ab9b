#!/usr/bin/env bash
# Prepared in session 49 (binaries dserve, dserve_mla_bench): issue 6's and 7's tables on the current tree (last full
# table: session 37, s37e): bf16 batch 1 / 8 / 64 / 256 with and without CUDA graphs (prefill lines too), FP8 batch
# 1 / 4 / 8 / 64, and the MLA decode kernel alone at 1 x 32K and 64 x 4K (16 heads), for BENCHMARKS.md.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
B1B_BATCHES=1,8,64,256 OUT=$OUT/b1b_graphs bash "$D/b1b.sh" | grep -E "^==|Decode\.  median|Prefill"
B1B_BATCHES=1,8,64,256 B1B_EXTRA=--disable-cuda-graph OUT=$OUT/b1b_eager bash "$D/b1b.sh" | grep -E "^==|Decode\.  median"
B1B_BATCHES=1,4,8,64 B1B_EXTRA="--quantization fp8" OUT=$OUT/b1b_fp8 bash "$D/b1b.sh" | grep -E "^==|Decode\.  median|Prefill"
MLA_BENCH_SHAPES=1x32768x16,64x4096x16 MLA_BENCH_ALT=0 timeout 60 "$B/dserve_mla_bench" > "$OUT/mla.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode" "$OUT/mla.log" | sed -E 's/; naive.*//' | cut -c1-170
