#!/usr/bin/env bash
# Session 50, sixth call (binary dserve): end-to-end check of the 8-row MLA decode blocks at V2-Lite's dims (the
# fixtures' heads are too small for the transposed kernel): greedy generation of 48 tokens after a 300-token prompt,
# V2-Lite config with dummy weights (bf16 and --quantization fp8), the decode graph with 16 rows (DSERVE_MLA_T8=0)
# vs 8 (default), and eager with 8: the output ids must agree (the per-row arithmetic is the same at N = 8 and 16).
set -u
source "$(dirname "$0")/lib.sh"
ids=$(python3 -c "print(','.join(str((i * 7919) % 100000 + 10) for i in range(300)))")
for q in "" "--quantization fp8"; do
  for run in "t16:DSERVE_MLA_T8=0:--cuda-graph-max-bs 1" "t8:DSERVE_MLA_T8=1:--cuda-graph-max-bs 1" \
             "t8eager:DSERVE_MLA_T8=1:--disable-cuda-graph"; do
    name=${run%%:*}; rest=${run#*:}; envv=${rest%%:*}; flags=${rest#*:}
    tag="${name}${q:+_fp8}"
    timeout 120 env "$envv" "$B/dserve" generate --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
      --load-format dummy --input-ids "$ids" --max-new-tokens 48 --ignore-eos --json $flags $q > "$OUT/$tag.json" \
      2> "$OUT/$tag.err"
    echo "== $tag rc=$? $(head -c 300 "$OUT/$tag.json")"
  done
done
python3 - "$OUT" <<'PY'
import json, sys, os
d = sys.argv[1]
def load(tag):
    try:
        return json.load(open(os.path.join(d, tag + ".json")))
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)}
for suf in ("", "_fp8"):
    runs = [load(t + suf) for t in ("t16", "t8", "t8eager")]
    a, b, c = (r.get("output_ids", []) for r in runs)
    la, lb = (r.get("output_token_logprobs", []) for r in runs[:2])
    dl = max((abs(x - y) for x, y in zip(la, lb)), default=float("nan"))
    print(f"CHECK {'ok  ' if a and a == b == c else 'FAIL'} {suf or 'bf16'}: 16-row graph == 8-row graph == 8-row eager "
          f"({len(a)} / {len(b)} / {len(c)} ids; first difference at "
          f"{next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)}; max |logprob diff| 16 vs 8 rows {dl:.3g})")
PY
