#!/usr/bin/env bash
# Session 60, third call: the select stages its keys with 16-byte loads, eight in flight a thread; the tensor-core
# scores double-buffer their key tiles. V3.2's GPU cases (parameter 4 = the v32 fixture), memcheck, the kernel alone,
# bench-one-batch on the V3.2-Exp config cut to 4 layers.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run idx 300 '*IndexerTopk*:Fixtures/CudaGraphTest.*/4:Fixtures/FixtureGpuTest.*/4:Fixtures/CudaGraphEngine.*'
grep -E "^ERR indexer|GRAPH |GRAPHSTATS|FAILED|Failure" "$OUT/idx.log" | head -40
memcheck_run idx_mc 200 '*IndexerTopk*:Fixtures/CudaGraphTest.ReplayMatchesEagerDecode/4'
timeout 120 $B/dserve_kernel_bench --filter indexer --csv "$OUT/kb.csv" 2>&1 | tail -10
v32_config "$OUT/v32.json" 4
for spec in "1 32768" "16 4096" "64 2048"; do
  set -- $spec
  timeout 150 $B/dserve bench-one-batch --device cuda --model-path "$OUT/v32.json" --load-format dummy \
    --output-len 16 --batch-size $1 --input-len $2 > "$OUT/v32_b$1_$2.log" 2>&1
  echo "== v32 batch $1 input $2 rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/v32_b$1_$2.log" | sed 's/.*latency: //' | tr '\n' ' ')"
done
