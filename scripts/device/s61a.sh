#!/usr/bin/env bash
# Session 61, first call: V3.2 prefill in the absorbed sparse form (each token's top-k latent rows) against the MHA
# form with the top-k as a mask (DSERVE_SPARSE_PREFILL_MIN_CONTEXT: 0 = always sparse, 1e9 = never), V3.2-Exp cut to
# 4 layers, batch 1, inputs 4K-32K; V3's same layers at 32K; where the 32K prefill's time goes in each form (CUPTI,
# kernel totals); what transformers' deepseek_v32 indexer does with its keys (FP8 / Hadamard or not).
set -u
source "$(dirname "$0")/lib.sh"
python3 - <<'PY' 2>&1 | head -80
import inspect, re, transformers
from transformers.models.deepseek_v32 import modeling_deepseek_v32 as m
print("transformers", transformers.__version__)
src = inspect.getsource(m)
for name in dir(m):
    if "Indexer" in name:
        print("=====", name)
        s = inspect.getsource(getattr(m, name))
        for l in s.split("\n"):
            if re.search(r"hadamard|fp8|quant|float8|rotate|def |topk|relu|softmax_scale|weights|k_norm|cache", l, re.I):
                print("  ", l.rstrip()[:150])
print("module-level mentions:", sorted(set(re.findall(r"\w*(?:hadamard|fp8|act_quant|float8)\w*", src, re.I))))
PY
v32_config "$OUT/v32.json" 4
python3 - "$OUT/v3.json" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.json"))
c.update(num_hidden_layers=4, first_k_dense_replace=3, num_nextn_predict_layers=0)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
run() {  # run NAME MODEL INPUT MIN_CONTEXT [env...]
  local name=$1 model=$2 input=$3 minc=$4; shift 4
  timeout 150 env DSERVE_SPARSE_PREFILL_MIN_CONTEXT=$minc "$@" $B/dserve bench-one-batch --device cuda \
    --model-path "$OUT/$model.json" --load-format dummy --output-len 4 --batch-size 1 --input-len $input \
    > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/$name.log" | sed 's/.*latency: //' | tr '\n' ' ')"
}
for input in 32768 16384 8192 4096; do
  run v32_sparse_$input v32 $input 0
  run v32_mha_$input v32 $input 1000000000
done
run v3_32768 v3 32768 0
for mode in sparse:0 mha:1000000000; do
  run trace_${mode%%:*} v32 32768 ${mode#*:} DSERVE_TRACE_OUT="$OUT/trace_${mode%%:*}.csv" LD_PRELOAD="$PWD/$B/libds_cupti_trace.so"
  python3 scripts/device/trace_summary.py "$OUT/trace_${mode%%:*}.csv" --all | head -24
  rm -f "$OUT/trace_${mode%%:*}.csv"
done
