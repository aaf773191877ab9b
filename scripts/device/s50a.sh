#!/usr/bin/env bash
# Prepared in session 49 for the next session's first call (binaries dserve, ds_ops_cuda_gpu_test,
# libds_cupti_trace.so): the whole GPU suite (with the new persistent small-M cases: GemmSmallMTest.* under
# DSERVE_SMALL_M_PERSIST=1, LargeWeightsPastTheBoundMatchTheCpu; none has run on a GPU yet), GemmSmallM under memcheck,
# a bf16 b1 trace with the persistent kernel and the lm_head on the small-M kernels, then bench A/B bf16 1,8 three
# rounds: base / persist (dense gate|up) / persist + cap 512 (and the lm_head) / cap 512 alone; FP8 once per form.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -20
memcheck_run memcheck_gemm 150 'GemmSmallM*'
DSERVE_SMALL_M_PERSIST=1 DSERVE_SMALL_M_CAP_MB=512 OUT=$OUT/trace_pc TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py pc "$OUT/trace_pc/trace_bs1.csv" --replays 1 | head -3
python3 scripts/device/replay_head.py "$OUT/trace_pc/trace_bs1.csv" --replays 1 --kernels 12 | tail -5
AB_BATCHES=1,8 AB_KINDS="bf16" AB_BINS="base per pc cap" AB_CFG_per=DSERVE_SMALL_M_PERSIST=1 \
  AB_CFG_pc=DSERVE_SMALL_M_PERSIST=1,DSERVE_SMALL_M_CAP_MB=512 AB_CFG_cap=DSERVE_SMALL_M_CAP_MB=512 AB_ROUNDS=3 \
  bash "$D/abbin.sh"
AB_BATCHES=1,8 AB_KINDS="fp8" AB_BINS="base pc" AB_CFG_pc=DSERVE_SMALL_M_PERSIST=1,DSERVE_SMALL_M_CAP_MB=512 \
  AB_ROUNDS=1 bash "$D/abbin.sh"
