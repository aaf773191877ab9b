#!/usr/bin/env bash
# Session 28, third call (tests/fixtures left behind, models/ and tests/data/downloads carried): the serving tests
# and the demo model's bench-accuracy on CUDA with the graph arena on by default (its first end-to-end run: the
# serving engine's graphs for every decode batch size share one region), binary: dserve.
set -u
source "$(dirname "$0")/lib.sh"
SERVER_TEST_TIMEOUT=150 OUT=$OUT/server bash "$(dirname "$0")/server_cuda.sh"
grep -h "captured CUDA graphs" "$OUT"/server/*.log 2>/dev/null | head -3 | cut -c1-260
OUT=$OUT/acc bash "$(dirname "$0")/accuracy.sh"
grep -h "captured CUDA graphs" "$OUT"/acc/*.log 2>/dev/null | head -3 | cut -c1-260
