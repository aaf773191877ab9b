#!/usr/bin/env bash
# Session 65: per-instruction stall samples (ncu source page) of the two memory-bound kernels behind issues 6 and 7:
# the MLA decode at V2-Lite batch 1 x 32K (the issue's 0.70 line) and the FP8 routed gate|up walk at one row
# (MoeFp8Test.SmallMColumnTilesAgree's first launch, as s38e); then repeats: V3.2 8K prefill with 64- / 128-key tiles
# (the DSA-masked kernel spills at 128), V3 8K prefill against main's binary ($B/main).
# (The walk page took the mma.sync fallback: the model's batch-1 walk is the wgmma one, kernels/moe_wgmma.cu.)
set -u
source "$(dirname "$0")/lib.sh"
ncu_source_page decode 'mla_decode_(t16_|m16_)?kernel' "$B/dserve_kernel_bench" \
  --filter 'mla_decode v2-lite batch=1 context=32768'
ncu_source_page walk 'moe_fp8_small_m' "$B/ds_ops_cuda_gpu_test" --gtest_filter=MoeFp8Test.SmallMColumnTilesAgree
v3_cut_config "$OUT/v3.json" 4
v32_config "$OUT/v32.json" 4
for round in 1 2; do
  prefill_run v32_8k_k128_$round "$OUT/v32.json" 8192
  prefill_run v32_8k_k64_$round "$OUT/v32.json" 8192 DSERVE_MLA_PREFILL_KEYS=64
  prefill_run v3_8k_new$round "$OUT/v3.json" 8192
  B=$B/main prefill_run v3_8k_main$round "$OUT/v3.json" 8192
done
