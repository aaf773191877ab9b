#!/usr/bin/env bash
# Session 60: V3.2's indexer on the tensor cores and its decode under CUDA graphs. The indexer / graph / fixture
# GPU cases (and memcheck), the kernel alone against the CUDA-core scores, then bench-one-batch on the V3.2-Exp
# config cut to 4 layers (3 dense + 1 MoE, dummy FP8): graphs vs eager, tensor-core vs CUDA-core scores, and the
# same layers of V3 (dense MLA, no indexer) at the same contexts.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run idx 200 '*IndexerTopk*:*CudaGraphTest*v32*:*FixtureGpuTest*v32*:*Speculative*v32*:*Dsa*'
grep -E "^ERR indexer|GRAPH |GRAPHSTATS|FAILED|Failure" "$OUT/idx.log" | head -40
memcheck_run idx_mc 150 '*IndexerTopk*:Fixtures/CudaGraphTest.ReplayMatchesEagerDecode/v32'
timeout 120 $B/dserve_kernel_bench --filter indexer --csv "$OUT/kb.csv" 2>&1 | tail -8
v32_config "$OUT/v32.json" 4
python3 - "$OUT/v3.json" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.json"))
c.update(num_hidden_layers=4, first_k_dense_replace=3, num_nextn_predict_layers=0)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
b1b() {  # name config env-assignments... -- bench-one-batch args
  local name=$1 cfg=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 150 $B/dserve bench-one-batch --device cuda --model-path "$cfg" --load-format dummy \
    --output-len 16 "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/$name.log" | sed 's/.*latency: //' | tr '\n' ' ')"
}
b1b v32_b1_32k "$OUT/v32.json" DSERVE_INDEXER_MMA=1 -- --batch-size 1 --input-len 32768
b1b v32_b1_32k_cudacore "$OUT/v32.json" DSERVE_INDEXER_MMA=0 -- --batch-size 1 --input-len 32768
b1b v32_b1_32k_eager "$OUT/v32.json" DSERVE_INDEXER_MMA=1 -- --batch-size 1 --input-len 32768 --disable-cuda-graph
b1b v3_b1_32k "$OUT/v3.json" X=1 -- --batch-size 1 --input-len 32768
b1b v32_b16_4k "$OUT/v32.json" DSERVE_INDEXER_MMA=1 -- --batch-size 16 --input-len 4096
b1b v32_b16_4k_cudacore "$OUT/v32.json" DSERVE_INDEXER_MMA=0 -- --batch-size 16 --input-len 4096
b1b v3_b16_4k "$OUT/v3.json" X=1 -- --batch-size 16 --input-len 4096
