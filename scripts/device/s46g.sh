#!/usr/bin/env bash
# Session 46, seventh call (~200 s; binaries dserve, ds_ops_cuda_gpu_test): the landed tree (greedy in bench-one-batch's
# graphs with the tokens on the device, inputs in one copy, the vectorised embedding, 1024-column greedy chunks): (1)
# the whole GPU suite; (2) bench-one-batch bf16 / FP8 b1 / b8 once; (3) why a batch-1-only run with output 64 (the
# graph-timing runs: 508-511 tok/s) beats the b1 of a `--batch-size 1,8` run with output 32 (~503): bf16 b1 alone at
# output 32 and 64, and `--batch-size 1,8` at output 64.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=1 AB_BINS="new" bash "$D/abbin.sh"
for spec in "1 32" "1 64" "1,8 64"; do
  set -- $spec
  timeout 60 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size "$1" --input-len 256 --output-len "$2" > "$OUT/probe_${1/,/_}_$2.log" 2>&1
  echo "== batch $1 output $2 rc=$?"; grep -E "Decode\.  median" "$OUT/probe_${1/,/_}_$2.log"
done
