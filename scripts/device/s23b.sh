#!/usr/bin/env bash
# Session 23, second call (tests/fixtures left behind, models/ carried): server_acceptance_test on CUDA with its
# clients started together again and the bf16 spot check that tolerates a path flip (a first difference the lone
# sequence ranks within 4 nats of its top, at most 2 of 20), eight runs; the other serving tests once; memcheck on
# the t16 MLA cases (cluster merges included).
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1
for rep in 1 2 3 4 5 6 7 8; do
  start=$(date +%s)
  timeout 150 python3 tests/server/server_acceptance_test.py "$DSERVE_BINARY" > "$OUT/acc_$rep.log" 2>&1
  echo "== acceptance rep $rep rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^prompt|FAIL|passed" "$OUT/acc_$rep.log" | cut -c1-240 | tail -5
done
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 SHARDS=4 GTEST_FILTER='Cases/MlaAbsorbedGpu.*t16*:MlaDecodeT16.*' \
  MEMCHECK_LIMIT=200 bash "$(dirname "$0")/gpusuite.sh"
SERVER_TEST_TIMEOUT=150 OUT=$OUT/server bash "$(dirname "$0")/server_cuda.sh"
