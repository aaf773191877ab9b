#!/usr/bin/env bash
# Session 21: server_acceptance_test on CUDA twice with this session's binary and twice with one linking session
# 20's MLA kernels (dserve_old: f889a50's mla_decode*.cu), alternating (s21g saw a near-tie mismatch and no
# retraction); server_engine_test (v2_lite fixture carried) with the new binary.
set -u
source "$(dirname "$0")/lib.sh"
export DSERVE_TEST_SERVE_ARGS="--device cuda" PYTHONUNBUFFERED=1
for rep in 0 1; do
  for bin in dserve dserve_old; do
    start=$(date +%s)
    DSERVE_BINARY=$PWD/$B/$bin timeout 150 python3 tests/server/server_acceptance_test.py "$PWD/$B/$bin" > "$OUT/acc_${bin}_$rep.log" 2>&1
    echo "== acceptance $bin rep $rep rc=$? ($(( $(date +%s) - start )) s)"; grep -E "FAIL|passed|first difference" "$OUT/acc_${bin}_$rep.log"
  done
done
DSERVE_BINARY=$PWD/$B/dserve timeout 150 python3 tests/server/server_engine_test.py "$PWD/$B/dserve" > "$OUT/engine.log" 2>&1
echo "== server_engine_test rc=$?"; tail -3 "$OUT/engine.log"
