#!/usr/bin/env bash
# Session 49, fifth call (binaries dserve, libds_cupti_trace.so): s49b's bf16 b1 trace shows layer 0's dense down
# (K = 10944, N = 2048, 256 CTAs of the small-M kernel) taking 22.6 us after the gate|up for 44.8 MB (~2 TB/s, 0.47
# of copy): 11 synchronous rounds of 4 chunks a warp. Rounds of 8 (the wide pre-wait form, DSERVE_SMALL_M_WIDE_PRE=2:
# grids of up to two CTAs an SM) halve the rounds: traced, then bench A/B bf16 / FP8 at 1,8, three rounds.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_SMALL_M_WIDE_PRE=2 OUT=$OUT/trace_wide2 TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
python3 scripts/device/replay_head.py "$OUT/trace_wide2/trace_bs1.csv" --replays 1 --kernels 12
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_BINS="base wide2" AB_CFG_base=DSERVE_SMALL_M_WIDE_PRE=1 \
  AB_CFG_wide2=DSERVE_SMALL_M_WIDE_PRE=2 AB_ROUNDS=3 bash "$D/abbin.sh"
