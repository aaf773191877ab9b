#!/usr/bin/env bash
# Session 40, fourth call (~200 s): ead87ea's code (the FP8 walk evict-first by default, the L2 prefetch removed
# again): the FP8 walk's kernel test (its settled run now takes the hint and must repeat the first run's bits), the
# whole GPU suite; then shared-experts fusion on the new defaults (DSERVE_SHARED_EXPERTS_FUSION=1, opt-in since
# session 28; last measured s39g on the FP8 walk without the hint, never with the bf16 walk), one round b1 / b8.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run fp8walk 150 'MoeFp8Test.WgmmaWalk*'
grep -E "Failure|MOEFP8WGMMA v2-lite" "$OUT/fp8walk.log" | head -20
SUITE_LIMIT=170 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=1 AB_BINS="new fu" AB_CFG_fu=DSERVE_SHARED_EXPERTS_FUSION=1 bash "$D/abbin.sh"
