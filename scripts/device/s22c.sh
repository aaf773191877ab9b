#!/usr/bin/env bash
# Session 22, call 3: the in-cluster split merge only where one cluster holds every split (no combine): the MLA GPU
# tests, dserve_mla_bench with and without it (DSERVE_MLA_CLUSTER=0) alternating, the merge's own timeline (forced
# sizes through MLA_TRACE_CLUSTER), bench-one-batch batch 1 / 8 / 64 / 256 with and without it.
set -u
source "$(dirname "$0")/lib.sh"
timeout 200 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*Mla*' > "$OUT/mla_tests.log" 2>&1
echo "== mla tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|tests ran" "$OUT/mla_tests.log" | head -30
for cfg in base cl0 base cl0; do
  envs=(); [ "$cfg" = base ] || envs=(DSERVE_MLA_CLUSTER=0)
  env "${envs[@]}" timeout 120 "$B/dserve_mla_bench" "$OUT/mla_$cfg.csv" > "$OUT/mla_$cfg.log" 2>&1
  echo "== mla_bench $cfg rc=$?"; grep -E "^mla_decode|^transposed" "$OUT/mla_$cfg.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s \([0-9.]+x slower\)//'
done
for spec in "16|1 4096 16" "2|64 512 16" "2|" "0|64 512 16"; do
  cl=${spec%%|*}; args=${spec#*|}
  MLA_TRACE_CLUSTER=$cl timeout 60 "$B/dserve_mla_trace" $args > "$OUT/trace.log" 2>&1
  echo "== trace cluster $cl [$args] rc=$?"; grep -vE "^ *(tile [12]|tile 1:)|^ *[0-9]+ \||^launch" "$OUT/trace.log" | head -30
done
printf '#!/bin/sh\nDSERVE_MLA_CLUSTER=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_cl0"
chmod +x "$B/dserve_cl0"
AB_BATCHES=1,8,64,256 AB_REPS=2 AB_BINS="dserve_cl0 dserve" bash "$(dirname "$0")/abbin.sh"
