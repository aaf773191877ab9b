#!/usr/bin/env bash
# Session 50, seventh call (binary dserve_mla_bench): the MLA decode alone at batch 1 and long contexts with fewer
# splits, where 8-row blocks then fit one wave (two row blocks read each tile, the second likely from the L2): the
# plan's splits and alternatives (MLA_BENCH_ALT), 16 rows (DSERVE_MLA_T8=0) vs the launcher's choice, two rounds.
set -u
source "$(dirname "$0")/lib.sh"
for r in 1 2; do
  for t8 in 0 1; do
    DSERVE_MLA_T8=$t8 MLA_BENCH_SHAPES=1x32768x16,1x16384x16,1x8192x16 MLA_BENCH_ALT=32,48,64,66,96 timeout 90 \
      "$B/dserve_mla_bench" > "$OUT/mla_long_${t8}_$r.log" 2>&1
    echo "== T8=$t8 round $r"
    grep -E "^mla_decode|alt splits" "$OUT/mla_long_${t8}_$r.log" | sed -E 's/ = [0-9]+ GB.s = / = /; s/; naive.*//; s/mla_decode kv=bf16 //'
  done
done
