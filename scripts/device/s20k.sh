#!/usr/bin/env bash
# Session 20: the FP8 cuBLASLt path's pad rows quantized as zero tokens in the quantization launch (Fp8QuantParams::
# M_pad) instead of two memsets: the FP8 GEMM / fixture / MoE tests, then dserve_fp8_gemm_bench old / new alternating.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/tests GTEST_FILTER='Fp8GemmGpu.*:Fp8Fixture*:MoeFp8Test.*' SUITE_LIMIT=200 bash "$(dirname "$0")/gpusuite.sh"
for rep in 0 1; do
  for bin in fp8bench_old dserve_fp8_gemm_bench; do
    timeout 100 "$B/$bin" --csv "$OUT/${bin}_$rep.csv" > "$OUT/${bin}_$rep.log" 2>&1
    echo "== $bin rep $rep rc=$?"
  done
done
