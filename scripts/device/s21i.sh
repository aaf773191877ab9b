#!/usr/bin/env bash
# Session 21, after the DSERVE_* switch reader (core/env.h) and the MLA bench refactor (mla_bench_case.h): the whole
# GPU suite (its tests flip switches through ScopedEnv), dserve_mla_bench and the timeline, bench-one-batch with the
# defaults and with DSERVE_PDL=0 / DSERVE_MLA_T16_EARLY=2 (the switches still read).
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite SUITE_LIMIT=200 bash "$(dirname "$0")/gpusuite.sh"
MLA_BENCH_SHAPES=1x32768x16,8x4096x16,64x4096x16,64x512x16 MLA_BENCH_ALT=64 timeout 100 "$B/dserve_mla_bench" "$OUT/mla.csv" > "$OUT/mla.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode|alt|cp.async" "$OUT/mla.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s//'
timeout 60 "$B/dserve_mla_trace" > "$OUT/trace.log" 2>&1
echo "== trace rc=$?"; grep -E "per decode|mean period|PDL wait|tile 3 landed|epilogue|block total" "$OUT/trace.log"
printf '#!/bin/sh\nDSERVE_PDL=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_nopdl"
chmod +x "$B/dserve_nopdl"
AB_BATCHES=1,8 AB_REPS=1 AB_BINS="dserve dserve_nopdl" bash "$(dirname "$0")/abbin.sh"
