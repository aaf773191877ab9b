#!/usr/bin/env bash
# (Written for a binary with code that was measured and removed in session 51; see BENCHMARKS.md "Session 51".)
# Session 51: the dense FP8 walk again, after s51e: the walk-map cache keyed by (weight, Np, Kp, scales) (s51e's
# failures were a freed weight's address coming back with another shape) and a deeper ring (8 stages by default:
# the dense tiles give ~one CTA an SM). Tests + memcheck, then alternating A/B at 32 / 48 / 64 (FP8): walk off,
# 8 stages (default), 6, 4; a traced batch-64 step.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run walk_tests 120 'Fp8GemmGpu.*:MoeFp8Test.WgmmaWalk*'
grep -E "FAILED|Failure" "$OUT/walk_tests.log" | head -10
memcheck_run walk_memcheck 150 'Fp8GemmGpu.DenseWalk*'
AB_BATCHES=32,48,64 AB_KINDS="fp8" AB_BINS="base walk s6 s4" AB_CFG_base=DSERVE_FP8_DENSE_WALK=0 \
  AB_CFG_s6=DSERVE_FP8_DENSE_WALK_STAGES=6 AB_CFG_s4=DSERVE_FP8_DENSE_WALK_STAGES=4 AB_ROUNDS=2 bash "$D/abbin.sh"
OUT=$OUT/fp8_64 TRACE_BS=64 TRACE_EXTRA="--quantization fp8" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py fp8_64 "$OUT/fp8_64/trace_bs64.csv" --replays 1 --anchor rope_copy 2>/dev/null | head -30
