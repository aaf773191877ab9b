#!/usr/bin/env bash
# (Record of what ran: the variants and DSERVE_MLA_PREFILL_VARIANT were removed after s61e; variant 0 is the kernel kept.)
# Session 61, fifth call: the whole GPU suite on this session's code (sparse V3.2 prefill, the multi-token indexer, the
# wgmma MLA prefill and its variants), then the variants again with the overlapped ones fixed (the next tile's S
# issued after O's rescale): kernel bench rows and V3 4 layers 32K / V2-Lite 16K prefill, variants 0 / 1 / 3.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=300 bash "$D/gpusuite.sh" 2>&1 | tail -30
grep -h "^ERR mha kernel" "$OUT"/ds_ops_cuda_gpu_test*.log | sort | head -40
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
for spec in "v3 32768" "lite 16384"; do
  set -- $spec
  for v in 0 1 3 0 1; do run ${1}_${2}_v$v $1 $2 DSERVE_MLA_PREFILL_VARIANT=$v; done
done
