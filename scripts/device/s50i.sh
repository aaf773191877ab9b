#!/usr/bin/env bash
# Session 50, ninth call (binaries dserve, ds_ops_cuda_gpu_test; o_proj's whole-K pre-wait round now the default): the
# whole GPU suite, then bench-one-batch bf16 1,8 and FP8 1,8 once on the final tree.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -20
b1b_run bf16 --batch-size 1,8 --output-len 32
b1b_run fp8 --batch-size 1,8 --output-len 32 --quantization fp8
b1b_run bf16b --batch-size 1,8 --output-len 32
