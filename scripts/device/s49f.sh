#!/usr/bin/env bash
# Session 49, sixth call (binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): long-K small-M products
# (kernels/gemm_small_m.cu long_k: V2-Lite's dense down) in rounds of 8 (default now) or 12 chunks a warp
# (DSERVE_SMALL_M_LONG_K; 0 = the old rounds of 4): the GemmSmallM tests, bf16 b1 traces (layer 0's dense down),
# bench A/B bf16 at 1,8, three rounds.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run gemm 120 'GemmSmallM*'
for u in 8 12; do
  DSERVE_SMALL_M_LONG_K=$u OUT=$OUT/trace_$u TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
  echo "== LONG_K=$u"; python3 scripts/device/replay_head.py "$OUT/trace_$u/trace_bs1.csv" --replays 1 --kernels 12 | tail -4
done
AB_BATCHES=1,8 AB_KINDS="bf16" AB_BINS="k4 k8 k12" AB_CFG_k4=DSERVE_SMALL_M_LONG_K=0 \
  AB_CFG_k8=DSERVE_SMALL_M_LONG_K=8 AB_CFG_k12=DSERVE_SMALL_M_LONG_K=12 AB_ROUNDS=3 bash "$D/abbin.sh"
