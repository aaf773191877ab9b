#!/usr/bin/env bash
# Session 66, third call: combine_vc's quantized store with one cluster barrier (amax pushed into every block; s66b's
# source page: two barriers' fences and waits were 27% of its samples) and an opt-in 16-stage ring for the FP8 down
# walk (DSERVE_MOE_DOWN_STAGES=16: most of its weights streamed before its PDL wait beside the gate|up walk; in the
# model the down walk took 9.9 us vs 5.9 alone). Consistency + memcheck, the walk's timing lines, V2-Lite FP8 and
# V3-shaped FP8 decode alternating with $B/main (= c614e5f, s66a's kernels), a trace of the winner.
# Binaries: dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so (~280 s). Run once (BENCHMARKS.md "Session 66"): the
# 16-stage down ring lost and was removed with its switch, so its rows now measure the default.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run ops 150 'MoeFp8Test.WgmmaWalk*:MlaAbsorbedVc.*:*Fp8Fixture*:*MlaDecode*'
grep -E "^MOEFP8WGMMA|FAILED|Failure" "$OUT/ops.log" | head -20
memcheck_run mc 120 'MoeFp8Test.WgmmaWalkMatchesTheWalk:MlaAbsorbedVc.*'
for round in 1 2; do
  b1b_run fp8_new$round --quantization fp8 --batch-size 1 8 --output-len 32
  DSERVE_MOE_DOWN_STAGES=16 b1b_run fp8_down16_$round --quantization fp8 --batch-size 1 8 --output-len 32
  DSERVE_MOE_DOWN_STAGES=8 b1b_run fp8_down8_$round --quantization fp8 --batch-size 1 8 --output-len 32
  B=$B/main b1b_run fp8_main$round --quantization fp8 --batch-size 1 8 --output-len 32
done
v3_config "$OUT/v3.json" 4
for round in 1 2; do
  decode_run v3_new$round "$OUT/v3.json" --batch-size 1 8 --output-len 32
  DSERVE_MOE_DOWN_STAGES=16 decode_run v3_down16$round "$OUT/v3.json" --batch-size 1 8 --output-len 32
  B=$B/main decode_run v3_main$round "$OUT/v3.json" --batch-size 1 8 --output-len 32
done
for tag in new down16; do
  env=(); [ $tag = down16 ] && env=(DSERVE_MOE_DOWN_STAGES=16)
  timeout 100 env "${env[@]}" DSERVE_TRACE_OUT="$OUT/trace_$tag.csv" LD_PRELOAD="$PWD/$B/libds_cupti_trace.so" \
    "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --quantization fp8 --batch-size 1 --input-len 256 --output-len 8 > "$OUT/b1b_$tag.log" 2>&1
  echo "== traced $tag rc=$?"
  python3 scripts/device/trace_summary.py "$OUT/trace_$tag.csv" > "$OUT/summary_$tag.txt" 2>&1
  sed -n 2,4p "$OUT/summary_$tag.txt" | cut -c1-90; sed -n 6,20p "$OUT/summary_$tag.txt"
done
