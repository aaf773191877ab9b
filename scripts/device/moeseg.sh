#!/usr/bin/env bash
# Issue 7: FP8 MoE prefill with the routed rows quantized once per layer (DSERVE_MOE_FP8_SEGMENTED=1). The FP8 MoE
# tests (SegmentedPrefillMatchesPerExpert compares it with the per-expert chain), memcheck on it, then V2-Lite
# `--quantization fp8` bench-one-batch prefill 64 x 512 and 1 x 512 with the switch off / on next to bf16 (same
# run), and the traced prefill with it on (fp8prefill.sh). Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 240 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.*:Fp8GemmGpu.*' > "$OUT/tests.log" 2>&1
echo "== MoeFp8Test + Fp8GemmGpu rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|segmented" "$OUT/tests.log" | tail -30
timeout 200 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.SegmentedPrefillMatchesPerExpert' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for v in "bf16 x" "fp8 0" "fp8 1"; do
  set -- $v
  q=(); [ $1 = fp8 ] && q=(--quantization fp8)
  env DSERVE_MOE_FP8_SEGMENTED=$2 timeout 150 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy "${q[@]}" --batch-size 1,64 \
    --input-len 512 --output-len 4 > "$OUT/b1b_$1_seg$2.log" 2>&1
  echo "== b1b $1 segmented=$2 rc=$?"; grep -E "^Prefill|median" "$OUT/b1b_$1_seg$2.log" | head -6
done
mkdir -p "$OUT/trace"
DSERVE_MOE_FP8_SEGMENTED=1 OUT="$OUT/trace" timeout 200 bash scripts/device/fp8prefill.sh
# FP8 decode with the dense FP8 kernels under PDL (quant_act, small-M GEMM) vs DSERVE_PDL=0, and linear_pair's
# shared quantization: batch 1 / 64 decode, same run.
for pdl in 1 0; do
  env DSERVE_PDL=$pdl timeout 150 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --quantization fp8 --batch-size 1,64 --input-len 256 --output-len 32 > "$OUT/b1b_fp8_pdl$pdl.log" 2>&1
  echo "== b1b fp8 decode PDL=$pdl rc=$?"; grep -E "median" "$OUT/b1b_fp8_pdl$pdl.log" | head -4
done
