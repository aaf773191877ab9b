#!/usr/bin/env bash
# Session 44, fourth call (~60 s; binary dserve_kernel_bench): does an L2 prefetch keep a weight range until a later
# read? (session 43's open question: the shared MLP's prefetch during the attention did not shorten it.)
# `dserve_kernel_bench --filter l2_prefetch`: per repetition a 256 MB read evicts the L2, then W (11.5 / 17.3 / 23 MB)
# is prefetched (cp.async.bulk.prefetch.L2, normal or evict-last lines) or read once (the L2-hit floor), then 0 / 14 /
# 28 MB of other reads, a 200 us host pause, and W read once, timed; baseline the same read cold.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/dserve_kernel_bench" --filter "l2_prefetch" --csv "$OUT/l2_prefetch.csv" > "$OUT/l2_prefetch.log" 2>&1
echo "== l2_prefetch rc=$?"
cat "$OUT/l2_prefetch.log" | tail -40
