#!/usr/bin/env bash
# Session 22, call 7: what the in-cluster split merge gives a whole decode step at long contexts: bench-one-batch
# V2-Lite (dummy bf16, graphs) batch 64 at input 4096 / 1024, output 16, with and without it (DSERVE_MLA_CLUSTER=0),
# alternating.
set -u
source "$(dirname "$0")/lib.sh"
printf '#!/bin/sh\nDSERVE_MLA_CLUSTER=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_cl0"
chmod +x "$B/dserve_cl0"
for len in 4096 1024; do
  for rep in 0 1; do
    for bin in dserve_cl0 dserve; do
      start=$(date +%s)
      timeout 200 "$B/$bin" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
        --load-format dummy --batch-size 64 --input-len $len --output-len 16 > "$OUT/${bin}_${len}_$rep.log" 2>&1
      echo "== $bin input $len rep $rep rc=$? ($(( $(date +%s) - start )) s)"
      grep -E "^Decode\.  median|^Prefill\. " "$OUT/${bin}_${len}_$rep.log" | head -3
    done
  done
done
