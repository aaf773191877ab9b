#!/usr/bin/env bash
# Session 22: with the small-M GEMMs pinned off (DSERVE_SMALL_M_GEMM=0: cuBLASLt at every M), is the CUDA serving
# path stable enough for exact spot checks? The every-output load check (8 rounds) and the acceptance test with
# its clients started together (the barrier of 6c113c6, tests/server/server_acceptance_barrier.py) 4 times.
set -u
source "$(dirname "$0")/lib.sh"
export PYTHONUNBUFFERED=1 DSERVE_TEST_SERVE_ARGS="--device cuda"
for name in smallm0 smallm0moe0; do
  envs=(DSERVE_SMALL_M_GEMM=0); [ "$name" = smallm0moe0 ] && envs=(DSERVE_SMALL_M_GEMM=0 DSERVE_MOE_SMALL_M=0)
  env "${envs[@]}" timeout 150 python3 tests/server/load_consistency_check.py "$PWD/$B/dserve" 8 > "$OUT/lc_$name.log" 2>&1
  echo "== load check $name rc=$?"; grep -E "^round [0-9]+:|differing" "$OUT/lc_$name.log" | tr '\n' ' '; echo
  grep -E "first difference" "$OUT/lc_$name.log" | cut -c1-200 | head -6
done
for rep in 1 2 3 4; do
  DSERVE_SMALL_M_GEMM=0 timeout 150 python3 tests/server/server_acceptance_barrier.py "$PWD/$B/dserve" > "$OUT/acc_$rep.log" 2>&1
  echo "== acceptance (barrier, small-M off) rep $rep rc=$?"; grep -E "^prompt|FAIL|passed" "$OUT/acc_$rep.log" | cut -c1-200 | tail -3
done
