#!/usr/bin/env bash
# Session 25: the transposed MLA decode kernel's progressive split merge (MlaDecodeParams::t16_progressive,
# DSERVE_MLA_PROGRESSIVE=1: the first finishers of a (sequence, row block) merge the splits as their flags rise; no
# combine launch). MLA GPU tests (the forced-progressive checks), the same with the switch on for every launch,
# then dserve_mla_bench alternating default / switch on (1 x 32K, 8 x 4K, 1 x 4K H16), twice. Correct but 3.5-9 us
# slower (BENCHMARKS.md, session 25): the code was removed after this run; a record of the call.
set -u
source "$(dirname "$0")/lib.sh"
SUITE_LIMIT=100 GTEST_FILTER='*Mla*' OUT=$OUT/tests bash "$(dirname "$0")/gpusuite.sh"
SUITE_LIMIT=100 DSERVE_MLA_PROGRESSIVE=1 GTEST_FILTER='*Mla*' OUT=$OUT/tests_on bash "$(dirname "$0")/gpusuite.sh"
for rep in 0 1; do
  for cfg in base DSERVE_MLA_PROGRESSIVE=1; do
    envs=(); [ "$cfg" = base ] || envs=("$cfg")
    env "${envs[@]}" MLA_BENCH_SHAPES=1x32768x16,8x4096x16,1x4096x16 MLA_BENCH_ALT=0 timeout 45 \
      "$B/dserve_mla_bench" > "$OUT/mla_${cfg}_$rep.log" 2>&1
    echo "== mla_bench $cfg rep $rep rc=$?"
    grep -E "^mla_decode" "$OUT/mla_${cfg}_$rep.log" | sed -E 's/ = [0-9]+ GB\/s//; s/ \([0-9.]+x slower\)//; s/naive .*max_rel/max_rel/' | cut -c1-200
  done
done
