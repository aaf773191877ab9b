#!/usr/bin/env bash
# Session 39, last call (~260 s): the bf16 MoE walk on wgmma (moe_wgmma.cu, the FP8 walk's kernel over bf16 bytes:
# k16, no scales; opt-in DSERVE_MOE_BF16_WGMMA=1), written this session, and the FP8 walk after the kernel became
# shared. (1) MoeGemmGpu.Bf16WgmmaWalkMatchesTheKernels, MoeGroupedTest.Bf16WgmmaWalkThroughTheOps,
# MoeFp8Test.WgmmaWalk*; (2) A/B bf16 V2-Lite b1 / b8 / b16 two rounds new vs bw, FP8 one round (the default's
# figures after the refactor); (3) the GPU suite; (4) memcheck on the bf16 tests.
# Prediction (issue 6: bf16 b1 2.02 ms, line 1.95): the bf16 MoE phase at ~3.3-3.5 TB/s (s31's trace) -> ~3.9:
# b1 -3 to -6%, b8 / b16 more if the mma.sync kernels are instruction-bound there too.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run bf16wg 120 'MoeGemmGpu.Bf16WgmmaWalk*:MoeGroupedTest.Bf16WgmmaWalk*:MoeFp8Test.WgmmaWalk*'
grep -E "MOEBF16WGMMA|MOEFP8WGMMA|Failure" "$OUT/bf16wg.log" | head -40
grep -B2 -A3 "Failure" "$OUT/bf16wg.log" | head -30
AB_BATCHES=1,8,16 AB_KINDS=bf16 AB_ROUNDS=2 AB_BINS="new bw" AB_CFG_bw=DSERVE_MOE_BF16_WGMMA=1 bash "$D/abbin.sh"
AB_BATCHES=1,8,16 AB_KINDS=fp8 AB_ROUNDS=1 AB_BINS="new" bash "$D/abbin.sh"
SUITE_LIMIT=120 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 60 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeGroupedTest.Bf16WgmmaWalk*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
