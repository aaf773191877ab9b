#!/usr/bin/env bash
# Session 38, third call (~400 s; binaries dserve, ds_ops_cuda_gpu_test from the working tree, prev/dserve = 47d379a):
# the FP8 MoE walk loads each tile's scales with its copies, a tile ahead (they were loaded at the tile's compute: a
# round trip on every tile's path once its bytes had landed; s38b's trace: gate|up walk ~3 us a tile for 32 KB, down
# ~3.7 us for 22.5 KB, 2.3 / 1.6 TB/s, and no faster when the shared expert's weights came from the L2).
# (1) the whole GPU suite (the walk bit for bit against the one-round kernel: MoeFp8Test.SmallMColumnTilesAgree) and
# memcheck on the FP8 MoE tests; (2) A/B FP8 three rounds b1 / b8: prev, new, new + the shared experts' L2 prefetch;
# (3) V3-shaped FP8 (5 layers) prev / new; (4) one FP8 layer's timeline with new.
# Prediction: FP8 b1 -5 to -10% (the walks' ~1.5 us a tile of exposed scale round trips, ~3-4 tiles a CTA, two walks a
# layer), b8 smaller; V3 faster too (its walks have more tiles a CTA).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.SmallMColumnTilesAgree:MoeFp8Test.CapturedInGraph:MoeFp8Test.MatchesCpuModelDims' \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
AB_KINDS=fp8 AB_ROUNDS=3 AB_BINS="prev new pf" AB_CFG_pf=DSERVE_L2_PREFETCH_MB=24 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BINS="prev new" bash "$D/abbin.sh"
OUT=$OUT/trace_fp8 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
