#!/usr/bin/env bash
# Session 67: the new endpoints end to end on CUDA over HTTP (dserve serve, CUDA graphs, the FP8 fixture with its MoE
# in e4m3): the expert recorder's start / generate / stop / dump (each MoE layer's row sums to top_k x the tokens
# forwarded), then /update_weights_from_disk to the same checkpoint (the greedy output unchanged) and to another
# config (400 naming the field). Binaries: dserve (~40 s).
set -u
source "$(dirname "$0")/lib.sh"
PORT=30567
export SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR=$OUT/rec
"$B/dserve" serve --model-path tests/fixtures/v3_fp8_h256 --device cuda --skip-tokenizer-init --port $PORT \
  --expert-distribution-recorder-mode stat --cuda-graph-max-bs 8 > "$OUT/server.log" 2>&1 &
SRV=$!
for i in $(seq 1 120); do curl -sf localhost:$PORT/health > /dev/null && break; sleep 0.5; done
gen() { curl -s localhost:$PORT/generate -H 'Content-Type: application/json' \
  -d '{"input_ids": [5, 9, 33, 71, 2, 18, 40], "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": true}}'; }
curl -s -X POST localhost:$PORT/start_expert_distribution_record; echo
G1=$(gen); echo "gen1 $G1"
curl -s -X POST localhost:$PORT/stop_expert_distribution_record; echo
curl -s -X POST localhost:$PORT/dump_expert_distribution_record; echo
python3 - "$OUT/rec" <<'PY'
import glob, json, sys
f = sorted(glob.glob(sys.argv[1] + "/expert_distribution_recorder_*.json"))[-1]
d = json.load(open(f))
print("dump rows", [sum(r) for r in d["logical_count"][0]], "(want 0 for the dense layer, then (7 + 5) x top_k)")
PY
curl -s localhost:$PORT/update_weights_from_disk -H 'Content-Type: application/json' \
  -d '{"model_path": "tests/fixtures/v3_fp8_h256", "weight_version": "same-2"}'; echo
G2=$(gen); echo "gen2 $G2"
python3 -c "import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print('same output after the update:', a['output_ids']==b['output_ids'], b['meta_info']['weight_version'])" "$G1" "$G2"
curl -s localhost:$PORT/update_weights_from_disk -H 'Content-Type: application/json' \
  -d '{"model_path": "tests/fixtures/v3"}' -w ' %{http_code}'; echo
kill $SRV; wait $SRV
echo "== server rc=$?"; grep -iE "error|fatal" "$OUT/server.log" | head -5
