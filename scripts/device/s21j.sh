#!/usr/bin/env bash
# Session 21: server_acceptance_test on CUDA three times after its batched-vs-single spot check moved to
# GEN_MIN_MARGIN (tests/server/harness.py).
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1 DSERVE_BINARY=$PWD/$B/dserve
for rep in 0 1 2; do
  start=$(date +%s)
  timeout 150 python3 tests/server/server_acceptance_test.py "$DSERVE_BINARY" > "$OUT/acc_$rep.log" 2>&1
  echo "== acceptance rep $rep rc=$? ($(( $(date +%s) - start )) s)"; grep -E "FAIL|passed|first difference" "$OUT/acc_$rep.log"
done
