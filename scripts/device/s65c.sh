#!/usr/bin/env bash
# Session 65: where the TMA-producer kernels wait, instruction by instruction: ncu's warp-state sampling (SourceCounters)
# of the MHA prefill (V3 128 heads x 4,096, first mla_prefill_tma_kernel launch) and of the indexer scores (V3.2 8K),
# each report printed as a per-SASS-instruction CSV (stall samples by reason) for reading after the call.
# Binaries: dserve_kernel_bench (~90 s).
set -u
source "$(dirname "$0")/lib.sh"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
"$ncu" --version | tail -1
src_page() {  # NAME KERNEL_REGEX BENCH_FILTER
  timeout 100 "$ncu" --clock-control none --kernel-name "regex:$2" --launch-count 1 --section WarpStateStats \
    --section SourceCounters -o "$OUT/$1" "$B/dserve_kernel_bench" --filter "$3" > "$OUT/$1_collect.log" 2>&1
  echo "== $1 collect rc=$?"
  timeout 60 "$ncu" -i "$OUT/$1.ncu-rep" --page source --print-source sass --csv > "$OUT/$1_sass.csv" 2> "$OUT/$1_sass.err"
  echo "== $1 sass rc=$? lines=$(wc -l < "$OUT/$1_sass.csv")"; head -c 600 "$OUT/$1_sass.csv"; echo
  timeout 60 "$ncu" -i "$OUT/$1.ncu-rep" --page details --section SourceCounters --section WarpStateStats \
    > "$OUT/$1_details.txt" 2>&1
  grep -vE "^\s*$|----" "$OUT/$1_details.txt" | head -40
}
src_page mha mla_prefill_tma_kernel 'mla_prefill v3 tokens=4096'
src_page idx indexer_scores_tma 'indexer_prefill v3.2 batch=1 context=8192'
