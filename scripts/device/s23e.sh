#!/usr/bin/env bash
# Session 23: should the split combine trigger its dependents at entry by default (DSERVE_MLA_COMBINE_EARLY=1:
# dserve_mla_bench 1 x 32K 20.8 -> 20.1 us, 8 x 4K 21.9 -> 20.6 in s23d)? bench-one-batch where the model runs
# that combine (batches > 4 with several splits and no cluster), alternating, three pairs at input 256 and two at
# input 4096; the MLA GPU tests under the switch.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/tests GTEST_FILTER='Cases/MlaAbsorbedGpu.*:MlaDecodeT16.*:MlaAbsorbedVc.*' SUITE_LIMIT=120 SHARDS=4 \
  DSERVE_MLA_COMBINE_EARLY=1 bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=8,16,32 AB_CONFIGS="base DSERVE_MLA_COMBINE_EARLY=1 base DSERVE_MLA_COMBINE_EARLY=1 base DSERVE_MLA_COMBINE_EARLY=1" \
  bash "$(dirname "$0")/ab.sh"
for cfg in base DSERVE_MLA_COMBINE_EARLY=1 base DSERVE_MLA_COMBINE_EARLY=1; do
  envs=(); [ "$cfg" = base ] || envs=("$cfg")
  env "${envs[@]}" timeout 100 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 8,32 --input-len 4096 --output-len 16 > "$OUT/long_$cfg.log" 2>&1
  echo "== long $cfg rc=$?"; grep -E "^Decode\.  median" "$OUT/long_$cfg.log"
done
