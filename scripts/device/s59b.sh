#!/usr/bin/env bash
# Session 59's second call: the speculative GPU cases after their expectations were corrected (the verify-graph case
# pads 3 sequences to 4 again; SpeculativeGpu compares drafted runs with the CUDA engine without drafts and prints the
# largest logprob difference of each run, SPECLP lines), eager and graph oracles apart to localise a verify-row error.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run spec 280 '*SpeculativeGpu*:*VerifyGraphs*:*CudaDraftGraphs*'
grep -h "SPECLP\|Failure\|which exceeds\|evaluates to\|first .* tokens\|OK \]\|FAILED \]" "$OUT/spec.log" | head -80
# CUDA speculative decoding is no longer gated (DSERVE_SPECULATIVE_CUDA gone): a served V3 3-layer + MTP dummy model
# with NEXTN at concurrency 4.
v3_config "$OUT/v3mtp.json" 3 mtp
if [ -x "$B/dserve" ]; then
  $B/dserve serve --device cuda --model-path "$OUT/v3mtp.json" --load-format dummy --skip-tokenizer-init --port 31201 \
    --max-running-requests 16 --cuda-graph-max-bs 16 --speculative-algorithm NEXTN > "$OUT/serve_spec.log" 2>&1 &
  pid=$!
  wait_ready "$OUT/serve_spec.log" $pid 120 && bench_random 31201 4 64 64
  grep -E "ready|rror|speculative" "$OUT/serve_spec.log" | head -4
  kill $pid; wait $pid 2>/dev/null
fi
