#!/usr/bin/env bash
# Session 66, fourth call (after the GPU suite in the same call): the FP8 wgmma walks stage every block scale of a
# tile in shared memory with its token rows (cp.async, one round trip a tile) instead of loading each block's scales
# one fold ahead (s66b: the down walk's scale product still 11.5% of its samples). The walks' cases, memcheck, their
# timing lines against main's test binary ($B/main = e492821), V2-Lite FP8 and V3-shaped FP8 decode alternating with
# main's dserve, a trace of this build. Binaries: dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so (~200 s).
# Run once (BENCHMARKS.md "Session 66"): the staging lost in the model and was reverted.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run ops 120 'MoeFp8Test.*:*Fp8Fixture*'
grep -E "^MOEFP8WGMMA" "$OUT/ops.log" | head -16
B=$B/main gtest_run ops_main 60 'MoeFp8Test.WgmmaWalkMatchesTheWalk'
grep -E "^MOEFP8WGMMA" "$OUT/ops_main.log" | head -16
memcheck_run mc 120 'MoeFp8Test.WgmmaWalk*'
for round in 1 2; do
  b1b_run fp8_new$round --quantization fp8 --batch-size 1 8 --output-len 32
  B=$B/main b1b_run fp8_main$round --quantization fp8 --batch-size 1 8 --output-len 32
done
v3_config "$OUT/v3.json" 4
for round in 1 2; do
  decode_run v3_new$round "$OUT/v3.json" --batch-size 1 8 --output-len 32
  B=$B/main decode_run v3_main$round "$OUT/v3.json" --batch-size 1 8 --output-len 32
done
timeout 100 env DSERVE_TRACE_OUT="$OUT/trace_new.csv" LD_PRELOAD="$PWD/$B/libds_cupti_trace.so" "$B/dserve" \
  bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy \
  --quantization fp8 --batch-size 1 --input-len 256 --output-len 8 > "$OUT/b1b_trace.log" 2>&1
echo "== traced rc=$?"
python3 scripts/device/trace_summary.py "$OUT/trace_new.csv" > "$OUT/summary_new.txt" 2>&1
sed -n 2,4p "$OUT/summary_new.txt" | cut -c1-90; sed -n 6,20p "$OUT/summary_new.txt"
