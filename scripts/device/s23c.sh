#!/usr/bin/env bash
# Session 23: server_acceptance_test on CUDA with the teacher-forced spot check (each streamed token against the
# top of `dserve score` on the streamed text: worst gap and how many positions are off the top), ten runs.
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1
for rep in ${REPS:-1 2 3 4 5 6 7 8 9 10}; do
  start=$(date +%s)
  timeout 150 python3 tests/server/server_acceptance_test.py "$DSERVE_BINARY" > "$OUT/acc_$rep.log" 2>&1
  echo "== acceptance rep $rep rc=$? ($(( $(date +%s) - start )) s) $(grep -c '^prompt' "$OUT/acc_$rep.log") differ from generate"
  grep -E "below the scored top|FAIL|passed|^prompt .* output|^  " "$OUT/acc_$rep.log" | cut -c1-400 | tail -14
done
