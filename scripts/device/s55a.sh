#!/usr/bin/env bash
# Session 55's one call (the device came back for ~one call late in the session; binaries dserve, ds_ops_cuda_gpu_test,
# dserve_fp8_gemm_bench; ~480 s): the most informative part of s54a + s54b. (1) The GPU suite: sessions 53-55's host
# changes and cases have never run on a GPU (the cluster split, quant_act's SiLU mode, the cluster residency policy,
# --cuda-graph-bs in the graph cases). (2) The cluster split's case under memcheck. (3) The kernel bench at 32 / 64
# tokens with clusters off and on (its "wgmma resident" lines give cudaOccupancyMaxActiveClusters). (4) V2-Lite FP8
# batch 48 / 64: default vs DSERVE_FP8_WGMMA_CLUSTER=8 vs DSERVE_FP8_SILU_QUANT=1, one round.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=150 bash "$D/gpusuite.sh"
memcheck_run cluster_mc 120 'Fp8GemmGpu.WgmmaClusterSplitMatchesReference:Fp8GemmGpu.QuantActSiluModeIsSiluMulThenQuantAct'
for c in 0 8; do
  DSERVE_FP8_WGMMA_CLUSTER=$c timeout 90 "$B/dserve_fp8_gemm_bench" --ms 32,64 > "$OUT/bench_cl$c.log" 2>&1
  echo "== bench cluster $c rc=$?"; grep -E "wgmma (splits|resident)" "$OUT/bench_cl$c.log" | head -40
  awk '$6=="wgmma" || $6=="ours" || $6=="cublaslt_fp8"' "$OUT/bench_cl$c.log" | head -80
done
AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="base cl sq" AB_CFG_base=base AB_CFG_cl=DSERVE_FP8_WGMMA_CLUSTER=8 \
  AB_CFG_sq=DSERVE_FP8_SILU_QUANT=1 AB_ROUNDS=1 OUT=$OUT/lite bash "$D/abbin.sh"
