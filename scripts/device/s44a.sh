#!/usr/bin/env bash
# Run record: the router fork (SharedFork::kAfterRouter, DSERVE_SHARED_FORK=router) was in this call's binaries only, measured, and not landed (BENCHMARKS.md, Session 44).
# Session 44's first call (~300 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): (1) the GPU suite on
# main's code (12ecd7b's test refactors never GPU-run); (2) A/B two rounds bf16 / FP8 V2-Lite b1 / b8: default vs the
# shared experts fused into the walks (DSERVE_SHARED_EXPERTS_FUSION=1, last measured in session 28, before the bf16
# wgmma walk) vs the shared MLP forked between the router GEMM and the routing (DSERVE_SHARED_FORK=router, new);
# (3) bf16 b1 traces of both variants (CSV kept).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new fus rt" AB_CFG_fus=DSERVE_SHARED_EXPERTS_FUSION=1 \
  AB_CFG_rt=DSERVE_SHARED_FORK=router bash "$D/abbin.sh"
for v in fus rt; do
  if [ $v = fus ]; then export DSERVE_SHARED_EXPERTS_FUSION=1; unset DSERVE_SHARED_FORK; else unset DSERVE_SHARED_EXPERTS_FUSION; export DSERVE_SHARED_FORK=router; fi
  OUT=$OUT/trace_$v TRACE_BS="1" TRACE_EXTRA="" TRACE_SUMMARY_ARGS="--links" bash "$D/trace.sh" > "$OUT/trace_$v.txt" 2>&1
  echo "== trace $v bf16: $(ls $OUT/trace_$v)"
  xz -9 "$OUT/trace_$v/trace_bs1.csv"
done
