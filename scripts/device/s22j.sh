#!/usr/bin/env bash
# Session 22: every output of the 200-stream retraction load against the unloaded server (load_consistency_check.py),
# 8 rounds per setting, to find which part of the CUDA path diverges (s22h: 2 of 4 acceptance runs).
set -u
source "$(dirname "$0")/lib.sh"
export PYTHONUNBUFFERED=1
for cfg in "base|" "side0|" "nooverlap|--disable-overlap-schedule" "nograph|--disable-cuda-graph" "pdl0|"; do
  name=${cfg%%|*}; flags=${cfg#*|}
  envs=(); [ "$name" = side0 ] && envs=(DSERVE_SIDE_STREAM=0); [ "$name" = pdl0 ] && envs=(DSERVE_PDL=0)
  start=$(date +%s)
  env "${envs[@]}" DSERVE_TEST_SERVE_ARGS="--device cuda $flags" timeout 150 python3 tests/server/load_consistency_check.py \
    "$PWD/$B/dserve" 8 > "$OUT/lc_$name.log" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^round [0-9]+:|differing" "$OUT/lc_$name.log" | tr '\n' ' '; echo
  grep -E "first difference" "$OUT/lc_$name.log" | cut -c1-200 | head -8
done
