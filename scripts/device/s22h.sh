#!/usr/bin/env bash
# Session 22, last call (models/ carried, tests/fixtures/ left behind): the serving tests on CUDA with this session's
# binary, server_acceptance_test (clients now start together) three more times, bench-accuracy on CUDA.
set -u
source "$(dirname "$0")/lib.sh"
SERVER_TEST_TIMEOUT=150 OUT=$OUT/server bash "$(dirname "$0")/server_cuda.sh"
export DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1
for rep in 1 2 3; do
  timeout 150 python3 tests/server/server_acceptance_test.py "$DSERVE_BINARY" > "$OUT/acceptance_$rep.log" 2>&1
  echo "== server_acceptance_test rep $rep rc=$?"; grep -E "FAIL|passed|retraction" "$OUT/acceptance_$rep.log" | tail -3
done
OUT=$OUT/accuracy bash "$(dirname "$0")/accuracy.sh"
