#!/usr/bin/env bash
# Prepared in session 38 for session 39's first call (~330 s; binaries dserve, ds_ops_cuda_gpu_test,
# dserve_kernel_bench from main): the FP8 MoE walk on native wgmma e4m3 (kernels/moe_fp8_wgmma.cu, written without a
# GPU; opt-in DSERVE_MOE_FP8_WGMMA=1 in the ops). (1) MoeFp8Test.WgmmaWalkMatchesTheWalk (V2-Lite gate|up / down and
# V3 down at 1 and 5 rows an expert, slot records before and after the wait, against the mma.sync walk and the W8A8
# product; MOEFP8WGMMA timings next to the walk's) and WgmmaWalkThroughTheOps (the switch through moe_experts at 1 / 4
# / 8 tokens); (2) memcheck on both; (3) the whole GPU suite; (4) A/B FP8 b1 / b8 three rounds new vs wg, V3-shaped FP8
# one round; (5) the bench probe for reference.
# Prediction: V2-Lite gate|up ~10.5 us alone vs the walk's ~11.8 (the probe's shape), down ~5-6 vs ~7.4; FP8 b1 -3 to
# -6% if the chain sees it. If the tests fail: fix the kernel first (the probe's layouts are the verified reference).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run wgmma 150 'MoeFp8Test.WgmmaWalk*'
grep -E "MOEFP8WGMMA|Failure|FAILED|differs|max_rel|Expected|Which is|did the" "$OUT/wgmma.log" | head -40
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 200 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.WgmmaWalk*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=fp8 AB_ROUNDS=3 AB_BINS="new wg" AB_CFG_wg=DSERVE_MOE_FP8_WGMMA=1 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BINS="new wg" AB_CFG_wg=DSERVE_MOE_FP8_WGMMA=1 \
  bash "$D/abbin.sh"
timeout 100 "$B/dserve_kernel_bench" --filter 'fp8_wgmma' > "$OUT/probe.log" 2>&1
echo "== probe rc=$?"; grep -E "fp8_wgmma" "$OUT/probe.log" | cut -c1-200
