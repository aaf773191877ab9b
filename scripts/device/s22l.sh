#!/usr/bin/env bash
# Session 22: the first-token logprob drift between a prompt's first request and its prefix-cached repeat on CUDA
# (prefix_cache_drift_check.py; the CPU gives 0.0000), default and with the M-dependent kernel choices pinned.
set -u
source "$(dirname "$0")/lib.sh"
export PYTHONUNBUFFERED=1
for cfg in "base|" "noradix|--disable-radix-cache" "smallm0|" "eager|--disable-cuda-graph"; do
  name=${cfg%%|*}; flags=${cfg#*|}
  envs=(); [ "$name" = smallm0 ] && envs=(DSERVE_SMALL_M_GEMM=0 DSERVE_MOE_SMALL_M=0)
  env "${envs[@]}" DSERVE_TEST_SERVE_ARGS="--device cuda $flags" timeout 120 python3 tests/server/prefix_cache_drift_check.py \
    "$PWD/$B/dserve" > "$OUT/drift_$name.log" 2>&1
  echo "== $name rc=$?"; grep -E "^prompt" "$OUT/drift_$name.log" | head -5; tail -3 "$OUT/drift_$name.log"
done
