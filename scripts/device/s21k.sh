#!/usr/bin/env bash
# Session 21: what the split combine costs between back-to-back MLA decodes at batch 1 x 32K: the timeline with and
# without it (MLA_TRACE_SKIP_COMBINE=1), and with the opt-in early trigger.
set -u
source "$(dirname "$0")/lib.sh"
for cfg in base MLA_TRACE_SKIP_COMBINE=1 DSERVE_MLA_COMBINE_EARLY=1 "MLA_TRACE_SKIP_COMBINE=1 DSERVE_MLA_T16_EARLY=2"; do
  envs=(); [ "$cfg" = base ] || envs=($cfg)
  for args in "" "8 4096 16"; do
    env "${envs[@]}" timeout 60 "$B/dserve_mla_trace" $args > "$OUT/trace.log" 2>&1
    echo "== $cfg [$args] rc=$?"; grep -E "per decode|mean period|PDL wait|Q load|tile 0 landed|tile 3 landed|epilogue|block total" "$OUT/trace.log"
  done
done
