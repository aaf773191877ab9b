#!/usr/bin/env bash
# Session 60, sixth call: the select split over a cluster of up to 8 blocks a token (histograms and output offsets
# summed through distributed shared memory) while the tokens' clusters fit one wave. The indexer cases (every mode,
# + memcheck), v32's graph cases, the kernel alone with the launcher's clusters and with one block a token
# (DSERVE_INDEXER_SELECT_CLUSTER=1), V3.2 4 layers at batch 1 x 32K and 16 x 4K.
# Measured and removed: the cluster path and DSERVE_INDEXER_SELECT_CLUSTER are gone (BENCHMARKS.md, session 60).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run idx 240 '*IndexerTopk*:Fixtures/CudaGraphTest.*/4:Fixtures/CudaGraphEngine.*/1:Fixtures/FixtureGpuTest.*/4'
grep -E "^ERR indexer|GRAPH |FAILED|Failure" "$OUT/idx.log" | head -40
memcheck_run idx_mc 200 '*IndexerTopk*'
for cl in 0 1 0 1; do
  echo "== select cluster $cl"
  DSERVE_INDEXER_SELECT_CLUSTER=$cl timeout 60 $B/dserve_kernel_bench --filter indexer 2>&1 | grep -E "^indexer"
done
v32_config "$OUT/v32.json" 4
for spec in "1 32768" "16 4096"; do
  set -- $spec
  timeout 150 $B/dserve bench-one-batch --device cuda --model-path "$OUT/v32.json" --load-format dummy \
    --output-len 16 --batch-size $1 --input-len $2 > "$OUT/v32_b$1_$2.log" 2>&1
  echo "== v32 batch $1 input $2 rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/v32_b$1_$2.log" | sed 's/.*latency: //' | tr '\n' ' ')"
done
