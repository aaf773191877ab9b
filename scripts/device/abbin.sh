#!/usr/bin/env bash
# A/B of binaries: bench-one-batch (V2-Lite config, dummy bf16, input 256 / output 32, graphs) at AB_BATCHES
# (default 1,8) with each .devbin binary named in AB_BINS (space-separated, e.g. "dserve_main dserve"), the list
# repeated AB_REPS times (default 3) so the binaries alternate; AB_EXTRA adds flags. Prints the decode lines per run.
set -u
source "$(dirname "$0")/lib.sh"
for ((rep = 0; rep < ${AB_REPS:-3}; rep++)); do
  for bin in ${AB_BINS:-dserve_main dserve}; do
    start=$(date +%s)
    log="$OUT/abbin_${bin}_r${rep}$(echo "${AB_EXTRA:+_$AB_EXTRA}" | tr -c 'A-Za-z0-9_\n' '_').log"
    timeout 200 "$B/$bin" bench-one-batch --device cuda \
      --model-path ${AB_MODEL:-tests/data/configs/deepseek-v2-lite.json} --load-format dummy \
      --batch-size ${AB_BATCHES:-1,8} --input-len 256 --output-len 32 ${AB_EXTRA:-} > "$log" 2>&1
    echo "== $bin rep $rep ${AB_EXTRA:-} rc=$? ($(( $(date +%s) - start )) s)"
    grep -E "^Decode\.  median" "$log" | head -12
  done
done
