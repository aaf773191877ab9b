#!/usr/bin/env bash
# (Written for a binary with code that was measured and removed in session 51; see BENCHMARKS.md "Session 51".)
# Session 51: the dense FP8 walk (Fp8Gemm::walk_into: the MoE wgmma walk on one dense weight where kAuto took
# cuBLASLt, 17-64 tokens). Its GPU tests and the FP8 GEMM / MoE walk tests, memcheck on the new ones, then
# bench-one-batch V2-Lite FP8 at 24 / 32 / 48 / 64 alternating: walk off (base), slots of 16 (the default), of 8;
# then a traced FP8 batch-64 step with the walk.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run walk_tests 120 'Fp8GemmGpu.*:MoeFp8Test.WgmmaWalk*'
grep -E "FAILED|Failure|error" "$OUT/walk_tests.log" | head -20
memcheck_run walk_memcheck 150 'Fp8GemmGpu.DenseWalk*'
AB_BATCHES=24,32,48,64 AB_KINDS="fp8" AB_BINS="base walk w8" AB_CFG_base=DSERVE_FP8_DENSE_WALK=0 \
  AB_CFG_w8=DSERVE_FP8_DENSE_WALK_ROWS=8 AB_ROUNDS=2 bash "$D/abbin.sh"
OUT=$OUT/fp8_64 TRACE_BS=64 TRACE_EXTRA="--quantization fp8" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py fp8_64 "$OUT/fp8_64/trace_bs64.csv" --replays 1 --anchor rope_copy 2>/dev/null | head -34
