#!/usr/bin/env bash
# Session 22: the whole per-launch timeline at batch 1 x 32K and 8 x 4K (decode ends first / p50 / last, the
# combine's wait and end), default, early combine, decode alone.
set -u
source "$(dirname "$0")/lib.sh"
for cfg in base DSERVE_MLA_COMBINE_EARLY=1 MLA_TRACE_SKIP_COMBINE=1; do
  envs=(); [ "$cfg" = base ] || envs=($cfg)
  for args in "" "8 4096 16"; do
    echo "== $cfg [$args]"
    env "${envs[@]}" timeout 60 "$B/dserve_mla_trace" $args 2>&1
  done
done
"$B/dserve_mla_bench" 2>&1 | tail -20
