#!/usr/bin/env bash
# Session 68, last call: the hidden-state / routed-expert GPU cases on the final binaries (the whole suite passed on
# 22d2e3c + d2e68f4 in s68b; since then only rank-0-only gathers, DP-rank row offsets and bench flags changed).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run hidden 120 'CudaGraphHidden.*:CudaOpsTest.MoeRecordIds:CudaGraphEngine.*:Fixtures/CudaWeightUpdate.*'
grep -hE "^GRAPH (hidden|routed)" "$OUT/hidden.log" | head -3
