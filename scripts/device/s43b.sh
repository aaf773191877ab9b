#!/usr/bin/env bash
# Session 43, second call (~150 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): the router's L2
# window (DSERVE_L2_PERSIST_ROUTER=8: the router GEMM's weights persist in an 8 MiB carve-out). (1) graph replays
# against eager decode with it; (2) A/B two rounds FP8 / bf16 V2-Lite b1 / b8: default vs r8; (3) bf16 b1 traces
# default and r8 (CSVs kept: the router's and routing's links under the shared gate|up).
# Run record: the router window it switches on (a launch attribute set in kernels/pdl.cuh, DSERVE_L2_PERSIST_ROUTER in
# cuda_ops.cpp) was built from an uncommitted working tree and never landed; main has no such switch.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_L2_PERSIST_ROUTER=8 gtest_run graphs_r8 150 '*CudaGraphTest.ReplayMatchesEagerDecode*'
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new r8" AB_CFG_r8=DSERVE_L2_PERSIST_ROUTER=8 bash "$D/abbin.sh"
for v in base r8; do
  if [ $v = r8 ]; then export DSERVE_L2_PERSIST_ROUTER=8; fi
  OUT=$OUT/trace_$v TRACE_BS="1" TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" > "$OUT/trace_$v.txt" 2>&1
  echo "== trace $v bf16"; grep -E "Decode\.  median" "$OUT/trace_$v.txt"; sed -n "/^links/,\$p" "$OUT/trace_$v.txt"
  xz -9 "$OUT/trace_$v/trace_bs1.csv"
done
