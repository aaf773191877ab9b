#!/usr/bin/env bash
# Prepared in session 54 (no device lent) for the call after s54a (binaries ds_ops_cuda_gpu_test, dserve,
# dserve_fp8_gemm_bench; ~500 s): two opt-ins written without a GPU. DSERVE_FP8_WGMMA_CLUSTER=8: the wgmma FP8 GEMM's
# K split summed inside thread-block clusters (Fp8GemmWgmmaParams::cluster); DSERVE_FP8_SILU_QUANT=1: at 33-64 tokens
# the gated MLPs' SiLU-mul makes the down's FP8 input in the same launch (quant_act's SiLU mode). (1) Their cases,
# also under memcheck, and the FP8 GEMM / MoE / fixture cases with both switches on everywhere. (2) The kernel bench at
# 32 / 64 tokens, every shape (V3 and V2-Lite): clusters off, on, and on within three waves (the "splits N cluster C"
# lines say what each shape took). (3) V2-Lite FP8 bench-one-batch 48 / 64: the default vs clusters vs the SiLU's
# quantization, alternating. s54c follows with the V3-shaped model and the two together.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run new 120 'Fp8GemmGpu.Wgmma*:Fp8GemmGpu.QuantActSiluMode*:MoeFp8Test.SiluQuantizationFeedsTheDown'
memcheck_run new_mc 150 'Fp8GemmGpu.WgmmaClusterSplitMatchesReference:Fp8GemmGpu.QuantActSiluMode*:MoeFp8Test.SiluQuantizationFeedsTheDown'
DSERVE_FP8_WGMMA_CLUSTER=8 DSERVE_FP8_SILU_QUANT=1 gtest_run both_all 280 'Fp8*:*Moe*:*Fixture*'
grep -E "^\[  FAILED" "$OUT/new.log" "$OUT/both_all.log" | head
# cluster size : waves (3: V3's q_b, 384 tiles of 12 blocks, may split in clusters of 2). With clusters at 1 / 8 / 16
# tokens too: the forced wgmma rows say whether the cluster split also beats the small-M kernel there (issue 7's
# small-M line at M = 1 / 8 fails for V3's small weights).
for cw in 0:1 8:1 8:3; do
  ms=32,64; [ "$cw" = 8:1 ] && ms=1,8,16,32,64
  DSERVE_FP8_WGMMA_CLUSTER=${cw%:*} DSERVE_FP8_WGMMA_CLUSTER_WAVES=${cw#*:} timeout 100 "$B/dserve_fp8_gemm_bench" \
    --ms $ms > "$OUT/bench_cl${cw/:/_}.log" 2>&1
  echo "== bench cluster $cw rc=$?"; grep -E "wgmma (splits|resident)" "$OUT/bench_cl${cw/:/_}.log" | head -70
  awk '$6=="wgmma" || $6=="ours"' "$OUT/bench_cl${cw/:/_}.log" | head -120
done
AB_BATCHES=48,64 AB_KINDS="fp8" AB_BINS="base cl sq" AB_CFG_base=base AB_CFG_cl=DSERVE_FP8_WGMMA_CLUSTER=8 \
  AB_CFG_sq=DSERVE_FP8_SILU_QUANT=1 AB_ROUNDS=2 OUT=$OUT/lite bash "$D/abbin.sh"
