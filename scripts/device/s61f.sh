#!/usr/bin/env bash
# Session 61, sixth call: the wgmma MLA prefill with 128-key tiles (two stages) against the 64-key default:
# consistency cases on every kernel (+ memcheck on one), kernel bench rows, V3 4 layers 32K prefill; and the V3.2
# sparse-prefill threshold again now that the MHA form runs on wgmma (V3.2 4 layers, 16K and 8K, both forms).
set -u
source "$(dirname "$0")/lib.sh"
timeout 120 $B/ds_ops_cuda_gpu_test --gtest_filter='Cases/MlaMhaGpu.*' > "$OUT/mha.log" 2>&1
echo "== mha rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/mha.log" | tr '\n' ' ')"
grep -E "^ERR.*(128|wgmma)|Failure" "$OUT/mha.log" | head -24
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 60 "$CS" --tool memcheck $B/ds_ops_cuda_gpu_test \
  --gtest_filter='Cases/MlaMhaGpu.*lite_prefill' > "$OUT/mha_mc.log" 2>&1
echo "== mha_mc rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/mha_mc.log" | tr '\n' ' ')"
timeout 60 $B/dserve_kernel_bench --filter mla_prefill 2>&1 | grep -E "mla_prefill|mla prefill"
v32_config "$OUT/v32.json" 4
python3 - "$OUT/v3.json" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.json"))
c.update(num_hidden_layers=4, first_k_dense_replace=3, num_nextn_predict_layers=0)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
run() {  # run NAME MODEL INPUT [env...]
  local name=$1 model=$2 input=$3; shift 3
  timeout 60 env "$@" $B/dserve bench-one-batch --device cuda --model-path "$OUT/$model.json" --load-format dummy \
    --output-len 2 --batch-size 1 --input-len $input > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Prefill\. latency' "$OUT/$name.log" | sed 's/.*latency: //' | tr '\n' ' ')"
}
run v3_32768_k128 v3 32768 DSERVE_MLA_PREFILL_KEYS=128
run v3_32768_k64 v3 32768 DSERVE_MLA_PREFILL_KEYS=64
run v32_16384_sparse v32 16384 DSERVE_SPARSE_PREFILL_MIN_CONTEXT=0
run v32_16384_mha v32 16384 DSERVE_SPARSE_PREFILL_MIN_CONTEXT=1000000000
run v32_8192_sparse v32 8192 DSERVE_SPARSE_PREFILL_MIN_CONTEXT=0
run v32_8192_mha v32 8192 DSERVE_SPARSE_PREFILL_MIN_CONTEXT=1000000000
