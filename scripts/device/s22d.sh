#!/usr/bin/env bash
# Session 22, call 4: the in-cluster merge with its loads in one round: the whole GPU suite, memcheck on the MLA
# cluster cases, dserve_mla_bench with and without it alternating, the merge's timeline, bench-one-batch A/B.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite SUITE_LIMIT=200 bash "$(dirname "$0")/gpusuite.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedGpu*t16*:*MlaAbsorbedGpu*m16_h8_b5*:*MlaAbsorbedGpu*m16_h13*:*MlaDecodeT16*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
for cfg in base cl0 base cl0; do
  envs=(); [ "$cfg" = base ] || envs=(DSERVE_MLA_CLUSTER=0)
  env "${envs[@]}" timeout 120 "$B/dserve_mla_bench" "$OUT/mla_$cfg.csv" > "$OUT/mla_$cfg.log" 2>&1
  echo "== mla_bench $cfg rc=$?"; grep -E "^mla_decode|^transposed" "$OUT/mla_$cfg.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s \([0-9.]+x slower\)//'
done
for spec in "16|1 4096 16" "2|64 512 16" "2|"; do
  cl=${spec%%|*}; args=${spec#*|}
  MLA_TRACE_CLUSTER=$cl timeout 60 "$B/dserve_mla_trace" $args > "$OUT/trace.log" 2>&1
  echo "== trace cluster $cl [$args] rc=$?"; grep -E "per decode|to the cluster|cluster merge|final barrier|epilogue|block total" "$OUT/trace.log"
done
printf '#!/bin/sh\nDSERVE_MLA_CLUSTER=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_cl0"
chmod +x "$B/dserve_cl0"
AB_BATCHES=64 AB_REPS=3 AB_BINS="dserve_cl0 dserve" bash "$(dirname "$0")/abbin.sh"
