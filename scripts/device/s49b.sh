#!/usr/bin/env bash
# Session 49, second call (binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): (1) the PDLHEAD probe with
# graphs of 43 / 403 / 1,403 kernels and 1 or 100 side kernels (s49a: no stall with 43); (2) is the bf16 b1 graph's
# ~10 us start stall a fixed time from the graph's launch or a gap after its first node? An experiment spin kernel of
# DSERVE_EXP_HEAD_SPIN_NS at the graph's head (0 / 6 / 12 us), traced, replay heads.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run pdlhead 120 'Pdl.GraphHeadWithASideBranch'
grep -h PDLHEAD "$OUT/pdlhead.log"
for ns in 0 6000 12000; do
  DSERVE_EXP_HEAD_SPIN_NS=$ns OUT=$OUT/trace_$ns TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
  echo "== head spin $ns ns: $(grep -E '^Decode\.  median' "$OUT/trace_$ns/b1b_bs1.log" | tr '\n' ' ')"
  python3 scripts/device/replay_head.py "$OUT/trace_$ns/trace_bs1.csv" --replays 3 --kernels 4
done
