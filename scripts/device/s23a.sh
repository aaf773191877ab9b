#!/usr/bin/env bash
# Session 23, first call (models/ left behind, fixtures carried): the whole GPU suite on main 13536d5 (its last
# commits were host-only and never GPU-run), memcheck on the t16 / cluster cases, dserve_mla_bench.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite SUITE_LIMIT=280 bash "$(dirname "$0")/gpusuite.sh"
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 SHARDS=2 GTEST_FILTER='MlaDecodeT16.*:MlaPlan.*' MEMCHECK_LIMIT=200 \
  bash "$(dirname "$0")/gpusuite.sh"
MLA_BENCH_SHAPES=1x32768x16,8x4096x16,64x4096x16,1x4096x16,64x512x16 MLA_BENCH_ALT=0 timeout 100 "$B/dserve_mla_bench" \
  "$OUT/mla.csv" > "$OUT/mla.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode|copy" "$OUT/mla.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s//' | head -12
