#!/usr/bin/env bash
# Session 21, call 5: the MLA decode changes (t16: one tile before the PDL wait, partials stored from the
# accumulators, decode-only metadata; the split combine's early trigger) on the whole GPU suite, memcheck on the MLA
# cases, dserve_mla_bench over every case, the batch 1 x 32K timeline, and bench-one-batch A/B through env switches
# (V2-Lite dummy bf16: in 256 / out 32 at batch 1, 8, 64; batch 1 at input 32768).
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite SUITE_LIMIT=200 bash "$(dirname "$0")/gpusuite.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 120 "$CS" --tool memcheck --leak-check no --error-exitcode 3 "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='*MlaAbsorbedGpu*t16*:*MlaAbsorbedGpu*lite_decode_b8*:*MlaAbsorbedGpu*v3_multi*' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
timeout 120 "$B/dserve_mla_bench" "$OUT/mla_all.csv" > "$OUT/mla_all.log" 2>&1
echo "== mla_bench rc=$?"; grep -E "^mla_decode|cp.async|alt" "$OUT/mla_all.log" | sed -E 's/; naive [0-9.]+ us = [0-9]+ GB\/s//'
for cfg in base DSERVE_MLA_COMBINE_EARLY=0; do
  envs=(); [ "$cfg" = base ] || envs=($cfg)
  env "${envs[@]}" timeout 60 "$B/dserve_mla_trace" > "$OUT/trace_${cfg//[^A-Za-z0-9]/_}.log" 2>&1
  echo "== trace $cfg rc=$?"; grep -vE "^ *[0-9]+ \||^launch|^trace:" "$OUT/trace_${cfg//[^A-Za-z0-9]/_}.log"
done
printf '#!/bin/sh\nDSERVE_MLA_COMBINE_EARLY=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_ce0"
printf '#!/bin/sh\nDSERVE_MLA_T16_EARLY=2 DSERVE_MLA_COMBINE_EARLY=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_old"
chmod +x "$B/dserve_ce0" "$B/dserve_old"
AB_BATCHES=1,8,64 AB_REPS=1 AB_BINS="dserve_ce0 dserve" bash "$(dirname "$0")/abbin.sh"
for bin in dserve_old dserve; do
  start=$(date +%s)
  timeout 150 "$B/$bin" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 1 --input-len 32768 --output-len 16 > "$OUT/long_$bin.log" 2>&1
  echo "== long context $bin rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^(Prefill|Decode)\.  median|^Decode" "$OUT/long_$bin.log" | head -4
done
