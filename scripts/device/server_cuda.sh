#!/usr/bin/env bash
# The serving issue's end-to-end tests (tests/server) on the CUDA backend (issue 6 acceptance), with the
# dserve binary in .devbin/. Logs under $OUT; keeps going after a failure.
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_BINARY=$PWD/$B/dserve DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1
for t in server_engine_test server_api_test stream_load_test server_acceptance_test; do
  start=$(date +%s)
  timeout ${SERVER_TEST_TIMEOUT:-200} python3 tests/server/$t.py "$DSERVE_BINARY" > "$OUT/$t.log" 2>&1
  rc=$?
  echo "== $t rc=$rc ($(( $(date +%s) - start )) s)"; tail -4 "$OUT/$t.log"
done
