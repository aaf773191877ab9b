#!/usr/bin/env bash
# Session 49, seventh call (binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): the whole GPU suite on the
# tree with the long-K rounds of 12 (default) and an experiment: the dense gate|up's SiLU product in one round of 8
# chunks a warp (DSERVE_SMALL_M_SILU_WIDE=8: 96 KB CTAs, two an SM, instead of 48 KB / four an SM with two rounds):
# traced, and bench A/B bf16 1,8 three rounds; FP8 1,8 once on the default.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -20
DSERVE_SMALL_M_SILU_WIDE=8 OUT=$OUT/trace_silu8 TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
python3 scripts/device/replay_head.py "$OUT/trace_silu8/trace_bs1.csv" --replays 2 --kernels 12 | grep -v "^ *[0-7]\.\|^ *[12][0-9]\.\|^ *3[0-5]\."
AB_BATCHES=1,8 AB_KINDS="bf16" AB_BINS="base silu8" AB_CFG_silu8=DSERVE_SMALL_M_SILU_WIDE=8 AB_ROUNDS=3 \
  bash "$D/abbin.sh"
b1b_run fp8 --batch-size 1,8 --output-len 32 --quantization fp8
