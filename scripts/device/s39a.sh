#!/usr/bin/env bash
# Prepared in session 38 for session 39's first call (~150 s; binaries ds_ops_cuda_gpu_test, dserve_kernel_bench from
# main): the FP8 MoE walk on native wgmma e4m3 (kernels/moe_fp8_wgmma.cu, written without a GPU, not wired into the
# ops). (1) MoeFp8Test.WgmmaWalkMatchesTheWalk: V2-Lite gate|up / down and V3 down at 1 and 5 rows an expert, slot
# records before and after the wait, against the mma.sync walk and the W8A8 product, MOEFP8WGMMA timings next to the
# walk's; (2) memcheck on it; (3) the whole GPU suite; (4) the bench probe again for reference.
# Prediction: V2-Lite gate|up ~10.5 us alone vs the walk's ~11.8 (the probe's shape), down ~5-6 vs ~7.4; if so, wire
# it into moe_experts for one-row-an-expert FP8 decode (maps built when the experts are prepared) and A/B the model.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run wgmma 150 'MoeFp8Test.WgmmaWalkMatchesTheWalk'
grep -E "MOEFP8WGMMA|Failure|FAILED|differs|max_rel|Expected|Which is" "$OUT/wgmma.log" | head -40
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 200 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.WgmmaWalkMatchesTheWalk' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
timeout 100 "$B/dserve_kernel_bench" --filter 'fp8_wgmma' > "$OUT/probe.log" 2>&1
echo "== probe rc=$?"; grep -E "fp8_wgmma" "$OUT/probe.log" | cut -c1-200
