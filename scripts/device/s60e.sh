#!/usr/bin/env bash
# Session 60, fifth call: the select with four keys a thread a round, block scans for the candidates and the output,
# one shared atomic a key. The indexer cases (+ memcheck), the kernel alone, V3.2 4 layers at batch 1 x 32K and
# 16 x 4K (graphs), and the same V3 layers (dense MLA) at batch 1 x 32K.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run idx 200 '*IndexerTopk*:Fixtures/CudaGraphTest.ReplayMatchesEagerDecode/4:Fixtures/CudaGraphEngine.*/1'
grep -E "^ERR indexer|GRAPH |FAILED|Failure" "$OUT/idx.log" | head -20
memcheck_run idx_mc 150 '*IndexerTopk*'
timeout 60 $B/dserve_kernel_bench --filter indexer 2>&1 | grep -E "indexer"
v32_config "$OUT/v32.json" 4
python3 - "$OUT/v3.json" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.json"))
c.update(num_hidden_layers=4, first_k_dense_replace=3, num_nextn_predict_layers=0)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
for spec in "v32 1 32768" "v3 1 32768" "v32 16 4096"; do
  set -- $spec
  timeout 150 $B/dserve bench-one-batch --device cuda --model-path "$OUT/$1.json" --load-format dummy \
    --output-len 16 --batch-size $2 --input-len $3 > "$OUT/$1_b$2_$3.log" 2>&1
  echo "== $1 batch $2 input $3 rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/$1_b$2_$3.log" | sed 's/.*latency: //' | tr '\n' ' ')"
done
