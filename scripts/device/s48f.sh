#!/usr/bin/env bash
# Session 48, sixth call (binaries dserve, libds_cupti_trace.so): does the bf16 graph's ~10 us start stall (sessions
# 46-47) grow with the number of side-stream forks? DSERVE_EXP_SIDE_FORKS=n (that call's binaries only): only the
# first n shared-expert sections of a forward fork onto the side stream (the rest run on the main stream before the
# routing). bf16 b1 traces for n = 0, 1, 4, 13 and the default (26), each: the replay's first kernels and its span.
# Run record: DSERVE_EXP_SIDE_FORKS existed only in this call's binaries.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for n in ${FORKS:-0 1 4 13 default}; do
  if [ "$n" = default ]; then unset DSERVE_EXP_SIDE_FORKS; else export DSERVE_EXP_SIDE_FORKS=$n; fi
  OUT=$OUT/trace_$n TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
done
unset DSERVE_EXP_SIDE_FORKS
for n in ${FORKS:-0 1 4 13 default}; do
  d=$OUT/trace_$n
  echo "== forks $n: $(grep -E '^Decode\.  median' "$d/b1b_bs1.log" | sed 's/.*throughput: //')"
  python3 scripts/device/replay_head.py "$d/trace_bs1.csv" --replays 3 --short
done
