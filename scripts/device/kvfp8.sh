#!/usr/bin/env bash
# FP8 KV cache on CUDA (issue 7): top-1 agreement of `dserve score` with --kv-cache-dtype fp8_e4m3 / fp8_e5m2 vs
# the bf16 cache (auto) on the demo model, positions whose bf16 margin exceeds 0.1, over eight texts of 40
# arithmetic questions each (scripts/kv_agreement.py, seeds 11-18). Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
timeout 300 python3 scripts/kv_agreement.py --dserve "$B/dserve" --device cuda --seeds 11-18 --base auto \
  --dtypes fp8_e4m3,fp8_e5m2 | tee "$OUT/agreement.txt"
