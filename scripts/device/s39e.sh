#!/usr/bin/env bash
# Session 39, fifth call (~260 s): the wgmma walk (six stages) as the default for decode-sized FP8 experts.
# (1) the wgmma tests (WgmmaWalkThroughTheOps now covers small dims, ue8m0 and a hot expert too) and memcheck on
# them; (2) the whole GPU suite; (3) A/B FP8 b1 / b8 three rounds, new against mma (DSERVE_MOE_FP8_WGMMA=0, the
# previous default); (4) V3-shaped FP8 five layers one round (its down walk qualifies: K 2048).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run wgmma 150 'MoeFp8Test.WgmmaWalk*'
grep -E "MOEFP8WGMMA|Failure|through the ops" "$OUT/wgmma.log" | head -30
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 200 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.WgmmaWalk*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=fp8 AB_ROUNDS=3 AB_BINS="new mma" AB_CFG_mma=DSERVE_MOE_FP8_WGMMA=0 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BINS="new mma" AB_CFG_mma=DSERVE_MOE_FP8_WGMMA=0 \
  bash "$D/abbin.sh"
