#!/usr/bin/env bash
# Prepared in session 54 (no device lent) for the call after s54a (binaries ds_ops_cuda_gpu_test, dserve,
# dserve_fp8_gemm_bench; ~420 s): the wgmma FP8 GEMM's K split summed inside thread-block clusters
# (DSERVE_FP8_WGMMA_CLUSTER=8; Fp8GemmWgmmaParams::cluster), written without a GPU. (1) Its cases, also under
# memcheck, and the FP8 GEMM / fixture cases with clusters everywhere. (2) The kernel bench at 32 / 64 tokens, every
# shape (V3 and V2-Lite), clusters off vs on vs on within three waves (the "splits N cluster C" lines say what each shape took). (3) V2-Lite
# FP8 bench-one-batch 32 / 48 / 64: the default vs clusters vs clusters from 17 tokens (DSERVE_FP8_WGMMA_MIN_M=17),
# alternating. (4) The V3-shaped 3-layer model at 32 / 64: the default vs clusters with V3's 15-117 MB attention and
# shared-expert weights let in (DSERVE_FP8_WGMMA_MAX_MB=128).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run cluster 90 'Fp8GemmGpu.Wgmma*'
memcheck_run cluster_mc 150 'Fp8GemmGpu.WgmmaClusterSplitMatchesReference'
DSERVE_FP8_WGMMA_CLUSTER=8 gtest_run cl_all 200 'Fp8*:*Fixture*'
grep -E "^\[  FAILED" "$OUT/cluster.log" "$OUT/cl_all.log" | head
for cw in 0:1 8:1 8:3; do  # cluster size : waves (3: V3's q_b, 384 tiles of 12 blocks, may split in clusters of 2)
  DSERVE_FP8_WGMMA_CLUSTER=${cw%:*} DSERVE_FP8_WGMMA_CLUSTER_WAVES=${cw#*:} timeout 60 "$B/dserve_fp8_gemm_bench" \
    --ms 32,64 > "$OUT/bench_cl${cw/:/_}.log" 2>&1
  echo "== bench cluster $cw rc=$?"; grep -E "wgmma splits" "$OUT/bench_cl${cw/:/_}.log" | head -24
  awk '$6=="wgmma" || $6=="ours"' "$OUT/bench_cl${cw/:/_}.log" | head -48
done
AB_BATCHES=32,48,64 AB_KINDS="fp8" AB_BINS="base cl cl17" AB_CFG_base=base AB_CFG_cl=DSERVE_FP8_WGMMA_CLUSTER=8 \
  AB_CFG_cl17=DSERVE_FP8_WGMMA_CLUSTER=8,DSERVE_FP8_WGMMA_MIN_M=17 AB_ROUNDS=2 OUT=$OUT/lite bash "$D/abbin.sh"
v3_config "$OUT/v3l3.json" 3
AB_MODEL="$OUT/v3l3.json" AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="base cl" AB_CFG_base=base \
  AB_CFG_cl=DSERVE_FP8_WGMMA_CLUSTER=8,DSERVE_FP8_WGMMA_MAX_MB=128 AB_ROUNDS=2 OUT=$OUT/v3 bash "$D/abbin.sh"
