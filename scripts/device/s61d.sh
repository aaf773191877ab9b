#!/usr/bin/env bash
# (Record of what ran: the variants and DSERVE_MLA_PREFILL_VARIANT were removed after s61e; variant 0 is the kernel kept.)
# Session 61, fourth call: the wgmma MLA prefill's four variants (mla_prefill.h: two warpgroups a block with three
# stages; the same with four stages and the next tile's S issued before the softmax; one warpgroup a block, two
# blocks an SM; one warpgroup overlapped). Consistency cases on every kernel (+ memcheck), the kernel bench's
# prefill rows, and V3 4 layers 32K / 8K, V2-Lite 16K prefill with DSERVE_MLA_PREFILL_VARIANT=0..3.
set -u
source "$(dirname "$0")/lib.sh"
timeout 300 $B/ds_ops_cuda_gpu_test --gtest_filter='Cases/MlaMhaGpu.*' > "$OUT/mha.log" 2>&1
echo "== mha rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/mha.log" | tr '\n' ' ')"
grep -E "ERR|FAILED|Failure|Expected" "$OUT/mha.log" | grep -v "max_rel [0-2]\.[0-9]*e-03" | head -20
grep -c "^ERR" "$OUT/mha.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 200 "$CS" --tool memcheck $B/ds_ops_cuda_gpu_test \
  --gtest_filter='Cases/MlaMhaGpu.*lite_prefill*:Cases/MlaMhaGpu.*v3_chunked*' > "$OUT/mha_mc.log" 2>&1
echo "== mha_mc rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/mha_mc.log" | tr '\n' ' ')"
timeout 200 $B/dserve_kernel_bench --filter mla_prefill 2>&1 | grep -E "mla_prefill|mla prefill"
python3 - "$OUT/v3.json" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.json"))
c.update(num_hidden_layers=4, first_k_dense_replace=3, num_nextn_predict_layers=0)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
cp tests/data/configs/deepseek-v2-lite.json "$OUT/lite.json"
run() {  # run NAME MODEL INPUT [env...]
  local name=$1 model=$2 input=$3; shift 3
  timeout 150 env "$@" $B/dserve bench-one-batch --device cuda --model-path "$OUT/$model.json" --load-format dummy \
    --output-len 4 --batch-size 1 --input-len $input > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Prefill\. latency' "$OUT/$name.log" | sed 's/.*latency: //' | tr '\n' ' ')"
}
for spec in "v3 32768" "lite 16384" "v3 8192"; do
  set -- $spec
  for v in 0 1 2 3; do run ${1}_${2}_v$v $1 $2 DSERVE_MLA_PREFILL_VARIANT=$v; done
done
run v3_32768_mma v3 32768 DSERVE_MLA_PREFILL_WGMMA=0
