#!/usr/bin/env bash
# Session 23, last call (fixtures left behind): server_acceptance_test on CUDA with the final spot check (scored top
# 100, within 4 nats at <= 2% of positions), six runs; then dserve_mla_bench under the early-load switches
# (DSERVE_MLA_T16_EARLY 1 / 2 x DSERVE_MLA_COMBINE_EARLY 0 / 1) and other split counts at batch 1 x 32K.
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_BINARY=$PWD/$B/dserve PYTHONUNBUFFERED=1
for rep in 1 2 3 4 5 6; do
  start=$(date +%s)
  DSERVE_TEST_SERVE_ARGS="--device cuda" timeout 150 python3 tests/server/server_acceptance_test.py "$DSERVE_BINARY" \
    > "$OUT/acc_$rep.log" 2>&1
  echo "== acceptance rep $rep rc=$? ($(( $(date +%s) - start )) s) $(grep -c '^prompt .* differs' "$OUT/acc_$rep.log") differ from generate"
  grep -E "below the scored top|FAIL|passed" "$OUT/acc_$rep.log" | cut -c1-300 | tail -4
done
for rep in 0 1; do
  for cfg in "1 0" "1 1" "2 0" "2 1"; do
    set -- $cfg
    DSERVE_MLA_T16_EARLY=$1 DSERVE_MLA_COMBINE_EARLY=$2 MLA_BENCH_SHAPES=1x32768x16,8x4096x16,64x4096x16 \
      MLA_BENCH_ALT=${ALT:-64} timeout 60 "$B/dserve_mla_bench" > "$OUT/mla_$1_$2_$rep.log" 2>&1
    echo "== mla_bench early=$1 combine_early=$2 rep $rep rc=$?"
    grep -E "^mla_decode|alt splits" "$OUT/mla_$1_$2_$rep.log" | sed -E 's/ = [0-9]+ GB\/s//; s/ \([0-9.]+x slower\); max_rel.*//' | cut -c1-160
  done
done
