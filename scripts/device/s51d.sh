#!/usr/bin/env bash
# (Written for a binary with code that was measured and removed in session 51; see BENCHMARKS.md "Session 51".)
# Session 51: `dserve tune-gemm` now times under CUDA-graph replay and tries each of cuBLASLt's heuristic
# algorithms per decode-sized M (lt_algo). Tune the V3 / V3.2 / V2-Lite shapes, show the table against the committed
# one, then bench-one-batch V2-Lite FP8 with the committed table (base) and the new one (new), alternating.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
OUT=$OUT/tune bash "$D/tune.sh"
NEW=$(ls "$OUT"/tune/fp8_gemm_*.json | head -1)
python3 - configs/fp8_gemm/NVIDIA_H200.json "$NEW" <<'PY'
import json, sys
old = {(s["N"], s["K"]): s for s in json.load(open(sys.argv[1]))["shapes"]}
for s in json.load(open(sys.argv[2]))["shapes"]:
    o = old.get((s["N"], s["K"]), {})
    print("%-16s %6d x %6d small_m_max %2s -> %2d lt_algo %s" % (s["name"], s["N"], s["K"], o.get("small_m_max"),
          s["small_m_max"], s.get("lt_algo", {})))
PY
AB_BATCHES=1,8,32,64 AB_KINDS="fp8" AB_BINS="base new" AB_CFG_new=DSERVE_FP8_GEMM_CONFIG=$NEW AB_ROUNDS=2 \
  bash "$D/abbin.sh"
