#!/usr/bin/env bash
# Session 21: the split merge inside the t16 decode kernel as its own instantiation (DSERVE_MLA_T16_MERGE=1,
# mergers load all splits in one round): MLA GPU tests with it, the bench and timeline with and without.
set -u
source "$(dirname "$0")/lib.sh"
DSERVE_MLA_T16_MERGE=1 timeout 120 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*MlaAbsorbed*:*MlaDecode*:*MlaFused*' > "$OUT/tests.log" 2>&1
echo "== tests merge rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$OUT/tests.log" | tail -6
for cfg in base DSERVE_MLA_T16_MERGE=1 "DSERVE_MLA_T16_MERGE=1 DSERVE_MLA_T16_EARLY=0"; do
  envs=(); [ "$cfg" = base ] || envs=($cfg)
  env "${envs[@]}" MLA_BENCH_SHAPES=1x32768x16,8x4096x16,64x4096x16 MLA_BENCH_ALT=0 timeout 100 "$B/dserve_mla_bench" "$OUT/mla.csv" > "$OUT/mla.log" 2>&1
  echo "== mla_bench $cfg rc=$?"; grep -E "^mla_decode" "$OUT/mla.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s//'
  env "${envs[@]}" timeout 60 "$B/dserve_mla_trace" > "$OUT/trace.log" 2>&1
  echo "== trace $cfg rc=$?"; grep -E "per decode|PDL wait|tile 0 landed|tile 3 landed|epilogue|block total" "$OUT/trace.log"
done
