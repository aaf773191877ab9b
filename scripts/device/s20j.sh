#!/usr/bin/env bash
# Session 20 (models/ carried, fixtures left behind): power-of-two FP8 KV scales (DSERVE_KV_POW2=1, a switch of that
# run's binary only: it lost and was not kept, see BENCHMARKS.md) on CUDA. The
# packed-cache tests with and without the switch (CPU and CUDA both follow it), then the demo model's FP8 KV
# top-1 agreement vs the bf16 cache over eight texts (kv_agreement.py, e4m3) both ways.
set -u
source "$(dirname "$0")/lib.sh"
F='MlaFusedTest.*:Cases/MlaAbsorbedGpu.*'
OUT=$OUT/tests GTEST_FILTER=$F SUITE_LIMIT=120 bash "$(dirname "$0")/gpusuite.sh"
DSERVE_KV_POW2=1 OUT=$OUT/tests_pow2 GTEST_FILTER=$F SUITE_LIMIT=120 bash "$(dirname "$0")/gpusuite.sh"
for mode in default pow2; do
  start=$(date +%s)
  if [ $mode = pow2 ]; then export DSERVE_KV_POW2=1; fi
  timeout 240 python3 scripts/kv_agreement.py --dserve "$B/dserve" --device cuda --seeds 11-18 --base auto \
    --dtypes fp8_e4m3 > "$OUT/agreement_$mode.txt" 2>&1
  echo "== agreement $mode rc=$? ($(( $(date +%s) - start )) s)"; tail -1 "$OUT/agreement_$mode.txt"
done
