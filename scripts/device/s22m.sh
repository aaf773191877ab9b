#!/usr/bin/env bash
# Session 22: the first-token logprobs of the prefix-cache drift check on CUDA against the CPU's fp32 ones (same 200
# prompts, demo model; scripts/device/drift_cpu_demo.json from DRIFT_SAVE on the dev machine): which path is off.
set -u
source "$(dirname "$0")/lib.sh"
export PYTHONUNBUFFERED=1
for cfg in "base|" "smallm0|" "gemm0|" "moe0|"; do
  name=${cfg%%|*}
  envs=(); [ "$name" = smallm0 ] && envs=(DSERVE_SMALL_M_GEMM=0 DSERVE_MOE_SMALL_M=0)
  [ "$name" = gemm0 ] && envs=(DSERVE_SMALL_M_GEMM=0); [ "$name" = moe0 ] && envs=(DSERVE_MOE_SMALL_M=0)
  env "${envs[@]}" DSERVE_TEST_SERVE_ARGS="--device cuda" timeout 120 python3 tests/server/prefix_cache_drift_check.py \
    "$PWD/$B/dserve" scripts/device/drift_cpu_demo.json > "$OUT/drift_$name.log" 2>&1
  echo "== $name rc=$?"; tail -5 "$OUT/drift_$name.log"
done
