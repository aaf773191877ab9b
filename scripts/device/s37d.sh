#!/usr/bin/env bash
# Session 37, fourth call (~420 s; binaries dserve, ds_ops_cuda_gpu_test, dserve_mla_bench, prev/dserve = main
# 2633e7d): the t16 decode kernel skips a tile's second 32-row half when it lies wholly past the context (the tile of
# a decode step's new row, loaded after the PDL wait: at bench-one-batch's 257-288 contexts always half empty).
# (1) the MLA GPU tests (t16 cases with partial last tiles, NaN-poisoned pages) and memcheck on them; (2) A/B FP8 and
# bf16, batch 1 / 8, three rounds: prev vs new vs new with the shared MLP forked after the routing for bf16 too
# (DSERVE_SHARED_AFTER_ROUTE=1; a tie on session 29's schedule); (3) dserve_mla_bench 1 x 32K / 64 x 4K with the
# pre-wait tile count 0 / 1 / 2 and the combine's early trigger off / on (H100 choices, never re-measured on the H200).
# Prediction: -0.3 to -0.6 us a layer (0.5-1% at batch 1) for the half tile; the MLA knobs within 1 us.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
gtest_run mla_tests 150 '*MlaAbsorbed*:MlaDecodeT16*:MlaDecodePlan*:MlaMha*'
grep -E "Failure|FAILED" "$OUT/mla_tests.log" | head -8
timeout 200 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" --gtest_filter='MlaDecodeT16*:Cases/MlaAbsorbedGpu*' \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
AB_ROUNDS=3 AB_BINS="prev new sar" AB_CFG_sar=DSERVE_SHARED_AFTER_ROUTE=1 bash "$D/abbin.sh"
for e in 1 0 2; do
  for c in 1 0; do
    DSERVE_MLA_T16_EARLY=$e DSERVE_MLA_COMBINE_EARLY=$c MLA_BENCH_SHAPES=1x32768x16,64x4096x16 MLA_BENCH_ALT=0 \
      timeout 45 "$B/dserve_mla_bench" > "$OUT/mla_e${e}_c$c.log" 2>&1
    echo "== mla_bench early tiles $e, combine early $c rc=$?"
    grep -E "^mla_decode" "$OUT/mla_e${e}_c$c.log" | sed -E 's/; naive.*//' | cut -c1-200
  done
done
