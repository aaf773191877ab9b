#!/usr/bin/env bash
# Session 24, first call (fixtures left behind): server_acceptance_test on CUDA with session 23's self-check (3
# runs), then dserve_mla_bench alternating over two switches: L2 prefetch of the block's later tiles before the
# PDL wait (DSERVE_MLA_T16_L2PF=1|2|3) and the split combine on 64-column blocks (DSERVE_MLA_COMBINE_COLS=64).
# DSERVE_MLA_T16_L2PF and DSERVE_MLA_COMBINE_COLS were measured and removed again (BENCHMARKS.md, session 24): a record.
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_BINARY=$PWD/$B/dserve PYTHONUNBUFFERED=1
for rep in ${REPS:-1 2 3}; do
  start=$(date +%s)
  DSERVE_TEST_SERVE_ARGS="--device cuda" timeout 150 python3 tests/server/server_acceptance_test.py "$DSERVE_BINARY" \
    > "$OUT/acc_$rep.log" 2>&1
  echo "== acceptance rep $rep rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "below the scored top|self-check|flagged|FAIL|passed" "$OUT/acc_$rep.log" | cut -c1-300 | tail -6
done
for rep in 0 1; do
  for cfg in "0 128" "1 128" "2 128" "3 128" "0 64" "1 64"; do
    set -- $cfg
    DSERVE_MLA_T16_L2PF=$1 DSERVE_MLA_COMBINE_COLS=$2 MLA_BENCH_SHAPES=${SHAPES:-1x32768x16,8x4096x16,64x4096x16} \
      MLA_BENCH_ALT=0 timeout 60 "$B/dserve_mla_bench" > "$OUT/mla_$1_$2_$rep.log" 2>&1
    echo "== mla_bench l2pf=$1 combine_cols=$2 rep $rep rc=$?"
    grep -E "^mla_decode" "$OUT/mla_$1_$2_$rep.log" | sed -E 's/ = [0-9]+ GB\/s//; s/ \([0-9.]+x slower\)//' | cut -c1-200
  done
done
