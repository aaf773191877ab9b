#!/usr/bin/env bash
# `dserve tune-gemm` on the DeepSeek-V3, V3.2 and V2-Lite configs; merges the tables into one per-GPU file
# ($OUT/fp8_gemm_<gpu>.json, to be committed under configs/fp8_gemm/). Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
for c in deepseek-v3 deepseek-v3.2-exp deepseek-v2-lite; do
  cfg=tests/data/configs/$c.json
  [ -f "$cfg" ] || cfg=../shared/configs/$c.json
  start=$(date +%s)
  timeout 150 "$B/dserve" tune-gemm --model-path "$cfg" --output "$OUT/$c.json" > "$OUT/$c.log" 2>&1
  echo "== tune-gemm $c rc=$? ($(( $(date +%s) - start )) s)"; grep -v '^wrote' "$OUT/$c.log" | head -30
done
python3 - "$OUT" <<'PY'
import json, sys, os, glob
out = sys.argv[1]
merged, seen = None, set()
for f in sorted(glob.glob(os.path.join(out, "deepseek-*.json"))):
    t = json.load(open(f))
    if merged is None:
        merged = {"device": t["device"], "default_small_m_max": t["default_small_m_max"], "shapes": []}
    for s in t["shapes"]:
        if (s["N"], s["K"]) not in seen:
            seen.add((s["N"], s["K"]))
            merged["shapes"].append(s)
if merged:
    name = merged["device"].replace(" ", "_")
    path = os.path.join(out, "fp8_gemm_%s.json" % name)
    json.dump(merged, open(path, "w"), indent=1)
    print("merged", len(merged["shapes"]), "shapes ->", path)
PY
