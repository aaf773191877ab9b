#!/usr/bin/env bash
# FP8 KV cache on CUDA (issue 7): top-1 agreement of `dserve score` with --kv-cache-dtype fp8_e4m3 / fp8_e5m2 vs
# the bf16 cache on the demo model (a trained model: margins mean something), over 40 arithmetic questions
# scored as one 1.5K-token sequence each way; positions whose bf16 margin exceeds 0.1. Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
python3 scripts/make_arithmetic_questions.py --num 40 --seed 7 > "$OUT/q.jsonl"
python3 -c "
import json
qs = [json.loads(l) for l in open('$OUT/q.jsonl')]
print(json.dumps(['Question: ' + q['question'] + ' Answer: ' + q['answer'] for q in qs]))" > "$OUT/texts.json"
"$B/dserve" tokenize --tokenizer-path models/dserve-demo < "$OUT/texts.json" > "$OUT/ids.json"
ids=$(python3 -c "import json; print(','.join(str(i) for s in json.load(open('$OUT/ids.json')) for i in s))")
for dt in auto fp8_e4m3 fp8_e5m2; do
  timeout 60 "$B/dserve" score --device cuda --model-path models/dserve-demo --kv-cache-dtype $dt --attention-mode absorbed \
    --chunk-size 64 --input-ids "$ids" --top-logprobs 2 --json > "$OUT/score_$dt.json" 2> "$OUT/score_$dt.err"
  echo "== score $dt rc=$?"; tail -2 "$OUT/score_$dt.err"
done
python3 - "$OUT" <<'PY'
import json, sys, os
d = sys.argv[1]
base = json.load(open(os.path.join(d, "score_auto.json")))
for dt in ("fp8_e4m3", "fp8_e5m2"):
    try:
        o = json.load(open(os.path.join(d, "score_%s.json" % dt)))
    except Exception as e:
        print(dt, "no result", e); continue
    agree = n = 0; worst = 0.0; tot = 0.0; cnt = 0
    for i, (a, b) in enumerate(zip(base["input_top_logprobs"], o["input_top_logprobs"])):
        if a is None or b is None: continue
        la, lb = base["input_token_logprobs"][i], o["input_token_logprobs"][i]
        worst = max(worst, abs(la - lb)); tot += abs(la - lb); cnt += 1
        if a[0][0] - a[1][0] > 0.1:
            n += 1; agree += a[0][1] == b[0][1]
    print(f"{dt} vs bf16 cache: top-1 agreement {agree}/{n} = {100.0*agree/max(n,1):.2f}% (margin > 0.1), "
          f"|logprob diff| max {worst:.4f} mean {tot/max(cnt,1):.5f} over {cnt} positions")
PY
