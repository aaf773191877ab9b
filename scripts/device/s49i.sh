#!/usr/bin/env bash
# Session 49, ninth call (binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): an experiment, the small-M
# kernel's activation rows in registers (small_m::accumulate_rows_xreg; DSERVE_SMALL_M_XREG=4 / 8: the SiLU pair in
# rounds of 4 / 8 with weights only staged, the long-K rounds of 16), so the same shared memory keeps more weight bytes
# in flight (the dense gate|up runs at ~0.76 of copy with 128 KB in flight an SM). GemmSmallM tests (plain and under
# memcheck), the fixture tests with XREG=8, a bf16 b1 trace with XREG=8, bench A/B bf16 1,8 three rounds.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run gemm 120 'GemmSmallM*'
memcheck_run memcheck_gemm 120 'GemmSmallM*'
DSERVE_SMALL_M_XREG=8 gtest_run fixture_xreg8 150 'FixtureGpuTest*'
DSERVE_SMALL_M_XREG=8 OUT=$OUT/trace_x8 TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
python3 scripts/device/replay_head.py "$OUT/trace_x8/trace_bs1.csv" --replays 2 --kernels 12 | grep -v "^ *[0-7]\.\|^ *[12][0-9]\.\|^ *3[0-5]\."
AB_BATCHES=1,8 AB_KINDS="bf16" AB_BINS="base x8 x4" AB_CFG_x8=DSERVE_SMALL_M_XREG=8 AB_CFG_x4=DSERVE_SMALL_M_XREG=4 \
  AB_ROUNDS=3 bash "$D/abbin.sh"
