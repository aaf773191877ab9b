#!/usr/bin/env bash
# A/B of decode-path switches: bench-one-batch (V2-Lite config, dummy bf16, input 256 / output 32, graphs) at
# AB_BATCHES (default 1,8) once per environment setting in AB_CONFIGS (space-separated; "base" = no extra
# variable, "VAR=val,VAR2=val" = those set); AB_EXTRA adds flags (e.g. --quantization fp8). Binary: .devbin/dserve. Prints the decode/prefill lines per run.
set -u
source "$(dirname "$0")/lib.sh"
for cfg in ${AB_CONFIGS:-base DSERVE_SMALL_M_GEMM=0 DSERVE_MOE_SMALL_M=0}; do
  envs=()
  [ "$cfg" = base ] || IFS=',' read -r -a envs <<< "$cfg"
  start=$(date +%s)
  log="$OUT/ab_$(echo "${cfg}${AB_EXTRA:+_$AB_EXTRA}" | tr -c 'A-Za-z0-9_\n' '_').log"
  env "${envs[@]}" timeout 150 "$B/dserve" bench-one-batch --device cuda \
    --model-path ${AB_MODEL:-tests/data/configs/deepseek-v2-lite.json} --load-format dummy \
    --batch-size ${AB_BATCHES:-1,8} --input-len 256 --output-len 32 ${AB_EXTRA:-} > "$log" 2>&1
  echo "== $cfg ${AB_EXTRA:-} rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^(Prefill\.|Decode\.  median)" "$log" | head -12
done
