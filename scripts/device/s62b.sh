#!/usr/bin/env bash
# Session 62's final device check (run after gpusuite in the same call: `all.sh gpusuite:200 s62b:100`): the new
# defaults in the model (the MHA prefill's shift-mapped loads as its only loads, the indexer on wgmma, V3.2's sparse
# prefill from 12,288 positions), each a prefill_run with no switch set.
set -u
source "$(dirname "$0")/lib.sh"
v3_cut_config "$OUT/v3.json" 4
prefill_run v3_32k "$OUT/v3.json" 32768
v32_config "$OUT/v32.json" 4
for n in 10240 12288 32768; do prefill_run v32_$n "$OUT/v32.json" $n; done
