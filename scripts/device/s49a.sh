#!/usr/bin/env bash
# Prepared in session 48 for the next session's first call (binaries dserve, ds_ops_cuda_gpu_test): the whole GPU
# suite (207: Pdl.GraphHeadWithASideBranch has never run), its PDLHEAD lines (does the bf16 graph's start stall
# reproduce in a synthetic graph?), then bench-one-batch bf16 / FP8 at `--batch-size 1,8`, one round, on the tree
# (session 48's engine-side input checks included).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
grep -h "PDLHEAD" "$OUT"/*.log | sort | uniq
b1b_run bf16 --batch-size 1,8 --output-len 32
b1b_run fp8 --batch-size 1,8 --output-len 32 --quantization fp8
