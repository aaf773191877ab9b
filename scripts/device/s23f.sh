#!/usr/bin/env bash
# Session 23, final binaries (main c037c49: the split combine's early trigger by default), models/ left behind: the
# whole GPU suite, then dserve_mla_bench at the issue's two H16 shapes.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite SUITE_LIMIT=200 bash "$(dirname "$0")/gpusuite.sh"
MLA_BENCH_SHAPES=1x32768x16,64x4096x16,8x4096x16 MLA_BENCH_ALT=0 timeout 40 "$B/dserve_mla_bench" > "$OUT/mla.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode" "$OUT/mla.log" | sed -E 's/ \([0-9.]+x slower\); max_rel.*//'
