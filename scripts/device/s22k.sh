#!/usr/bin/env bash
# Session 22: is the loaded-vs-unloaded divergence on CUDA (s22j: ~2% of outputs in every setting) retraction /
# paging, or batch-dependent bf16 numerics? The same load on a pool large enough for all 200 (no retraction), and
# with max-running-requests 1 (no batching at all: loaded outputs must equal the unloaded ones).
set -u
source "$(dirname "$0")/lib.sh"
export PYTHONUNBUFFERED=1 DSERVE_TEST_SERVE_ARGS="--device cuda"
for cfg in "bigpool|100000" "pool1024|1024"; do
  name=${cfg%%|*}; pool=${cfg#*|}
  start=$(date +%s)
  LOAD_CHECK_POOL=$pool timeout 150 python3 tests/server/load_consistency_check.py "$PWD/$B/dserve" 6 > "$OUT/lc_$name.log" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^round [0-9]+:|differing" "$OUT/lc_$name.log" | tr '\n' ' '; echo
  grep -E "first difference" "$OUT/lc_$name.log" | cut -c1-200 | head -6
done
start=$(date +%s)
DSERVE_TEST_SERVE_ARGS="--device cuda --max-running-requests 1" LOAD_CHECK_POOL=100000 timeout 200 \
  python3 tests/server/load_consistency_check.py "$PWD/$B/dserve" 1 > "$OUT/lc_serial.log" 2>&1
echo "== serial rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^round [0-9]+:|differing|first difference" "$OUT/lc_serial.log" | cut -c1-200 | head -6
