#!/usr/bin/env bash
# Prepared in session 41 for session 42's first call (~380 s; binaries dserve, ds_ops_cuda_gpu_test from main):
# the FP8 down walk quantizing its own bf16 input (MoeFp8GemmParams::x_bf16, the kQx kernels in moe_wgmma.cu; opt-in
# DSERVE_MOE_FP8_WALK_QUANT=1), written without a GPU: s41b's FP8 batch-1 trace has the quant_act launch between the
# gate|up and down walks (grid 9) ending 2.0 us after the gate|up walk, on the critical chain of every MoE layer, and the
# down walk launching only at its trigger (0.4 us before the gate|up walk's end). (1) its tests
# (bit for bit against the host-quantized walk and through the ops against the quant_act path) and memcheck; (2) A/B
# two rounds FP8 V2-Lite b1 / b4 / b8 / b16 and V3-shaped 5 layers b1 / b8: default vs wq; (3) an FP8 batch-1 trace
# with wq. If wq wins: make it the default (ops constructor), run the GPU suite under it.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run walkquant 150 'MoeFp8Test.WgmmaWalkQuantizesItsInput:MoeFp8Test.WalkQuantThroughTheOps:MoeFp8Test.WgmmaWalk*'
grep -E "Failure|FAILED|error" "$OUT/walkquant.log" | head -20
memcheck_run walkquant_memcheck 150 'MoeFp8Test.WgmmaWalkQuantizesItsInput'
AB_BATCHES=1,4,8,16 AB_KINDS=fp8 AB_ROUNDS=2 AB_BINS="new wq" AB_CFG_wq=DSERVE_MOE_FP8_WALK_QUANT=1 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_BATCHES=1,8 AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new wq" \
  AB_CFG_wq=DSERVE_MOE_FP8_WALK_QUANT=1 bash "$D/abbin.sh"
# (4) bf16 b1 / b8: the MoE-summing norm's early trigger alone (DSERVE_PDL_EARLY_MOE_NORM=1; s34 measured it a tie
# beside the mma.sync MoE kernels; the walks leave SM room now), two rounds.
AB_BATCHES=1,8 AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new ne" AB_CFG_ne=DSERVE_PDL_EARLY_MOE_NORM=1 bash "$D/abbin.sh"
DSERVE_MOE_FP8_WALK_QUANT=1 OUT=$OUT/trace_wq TRACE_BS="1" TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" > "$OUT/trace_wq.txt" 2>&1
echo "== trace wq fp8"; sed -n "/^timeline/,\$p" "$OUT/trace_wq.txt"
xz -9 "$OUT/trace_wq/trace_bs1.csv"
