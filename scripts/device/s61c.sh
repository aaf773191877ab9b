#!/usr/bin/env bash
# Session 61, third call: the MHA-form MLA prefill on wgmma (mla_prefill_wgmma.cu) against the mma.sync kernel.
# Consistency cases on both kernels (+ memcheck), the kernel bench's prefill rows, and prefill at the model level:
# V3 4 layers at 32K / 8K, V2-Lite at 4K, V3.2 4 layers at 4K (the masked form), DSERVE_MLA_PREFILL_WGMMA=1 / 0.
set -u
source "$(dirname "$0")/lib.sh"
timeout 300 $B/ds_ops_cuda_gpu_test --gtest_filter='Cases/MlaMhaGpu.*' > "$OUT/mha.log" 2>&1
echo "== mha rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/mha.log" | tr '\n' ' ')"
grep -E "ERR|FAILED|Failure|Expected|max_rel" "$OUT/mha.log" | head -40
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 200 "$CS" --tool memcheck $B/ds_ops_cuda_gpu_test \
  --gtest_filter='Cases/MlaMhaGpu.*lite_prefill*:Cases/MlaMhaGpu.*v3_chunked*' > "$OUT/mha_mc.log" 2>&1
echo "== mha_mc rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/mha_mc.log" | tr '\n' ' ')"
timeout 200 $B/dserve_kernel_bench --filter mla_prefill 2>&1 | grep -E "mla_prefill|mla prefill"
v32_config "$OUT/v32.json" 4
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
  echo "== $name rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/$name.log" | sed 's/.*latency: //' | tr '\n' ' ')"
}
for spec in "v3 32768" "v3 8192" "lite 4096" "lite 16384" "v32 4096"; do
  set -- $spec
  run ${1}_${2}_wgmma $1 $2 DSERVE_MLA_PREFILL_WGMMA=1
  run ${1}_${2}_mma $1 $2 DSERVE_MLA_PREFILL_WGMMA=0
done
