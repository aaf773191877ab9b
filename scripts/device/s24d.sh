#!/usr/bin/env bash
# Session 24: how much of the batch 1 x 32K MLA period is the split partials' bytes. DSERVE_MLA_HALF_PARTIALS=1 is a
# timing-only switch (wrong results): the decode stores half of each partial's columns and the combine loads 8
# instead of 16 bytes a lane, the bytes bf16 partials would move. Also no tile before the PDL wait
# (DSERVE_MLA_T16_EARLY=0) now that the combine triggers at entry. Alternating, three runs each.
# DSERVE_MLA_HALF_PARTIALS was measured and removed again (BENCHMARKS.md, session 24): a record of the call.
set -u
source "$(dirname "$0")/lib.sh"
for rep in 0 1 2; do
  for cfg in base DSERVE_MLA_HALF_PARTIALS=1 DSERVE_MLA_T16_EARLY=0; do
    envs=(); [ "$cfg" = base ] || envs=("$cfg")
    env "${envs[@]}" MLA_BENCH_SHAPES=1x32768x16,8x4096x16 MLA_BENCH_ALT=0 timeout 60 "$B/dserve_mla_bench" \
      > "$OUT/mla_${cfg}_$rep.log" 2>&1
    echo "== mla_bench $cfg rep $rep rc=$?"
    grep -E "^mla_decode" "$OUT/mla_${cfg}_$rep.log" | sed -E 's/ = [0-9]+ GB\/s//; s/ \([0-9.]+x slower\)//; s/naive .*max_rel/max_rel/' | cut -c1-200
  done
done
