#!/usr/bin/env bash
# Issue 7, session 9's blind CUDA work: the FP8 MoE prefill with the routed rows quantized once per layer
# (DSERVE_MOE_FP8_SEGMENTED=1), the norms' FP8 activations (DSERVE_FP8_FUSED_NORM=1), linear_pair's shared
# quantization and PDL on the dense FP8 kernels. Their tests (MoeFp8Test incl. SegmentedPrefillMatchesPerExpert and
# NormQuantizationFeedsTheFp8Ops, Fp8GemmGpu incl. LinearPairSharesTheQuantization, RmsNormQuantGpu), memcheck
# on the new ones, then V2-Lite `--quantization fp8` bench-one-batch: prefill 64 x 512 and 1 x 512 with the
# segmented switch off / on next to bf16, decode batch 1 / 64 with the fused norm off / on and PDL off (same run),
# and the traced prefill with the segmented path (fp8prefill.sh). Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 240 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.*:Fp8GemmGpu.*:RmsNorm*' > "$OUT/tests.log" 2>&1
echo "== MoeFp8Test + Fp8GemmGpu + RmsNorm rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|segmented" "$OUT/tests.log" | tail -30
timeout 200 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.SegmentedPrefillMatchesPerExpert:MoeFp8Test.NormQuantizationFeedsTheFp8Ops:RmsNormQuantGpu.*:Fp8GemmGpu.LinearPair*' \
  > "$OUT/memcheck.log" 2>&1
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
# FP8 decode: the norms' FP8 activations on / off, and PDL off (the dense FP8 kernels now take it), same run.
for v in "fused 1 1" "plain 0 1" "nopdl 0 0"; do
  set -- $v
  env DSERVE_FP8_FUSED_NORM=$2 DSERVE_PDL=$3 timeout 150 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 1,64 \
    --input-len 256 --output-len 32 > "$OUT/b1b_fp8_$1.log" 2>&1
  echo "== b1b fp8 decode $1 (fused norm $2, PDL $3) rc=$?"; grep -E "median" "$OUT/b1b_fp8_$1.log" | head -4
done
