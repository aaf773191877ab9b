#!/usr/bin/env bash
# Session 52, first call: the split-K wgmma FP8 GEMM (kernels/fp8_gemm_wgmma.cu). Its consistency cases (and the FP8
# GEMM suite around it), memcheck on them, dserve_fp8_gemm_bench at 1-64 tokens on V2-Lite's and V3's shapes (wgmma
# next to the default path and cuBLASLt), then bench-one-batch V2-Lite FP8 at 32 / 64 with it (default) and without
# (DSERVE_FP8_WGMMA=0: cuBLASLt past 16 tokens as before), alternating.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run fp8gemm 120 'Fp8GemmGpu.*'
grep -E "FAILED|Failure|error|mismatch" "$OUT/fp8gemm.log" | head -20
memcheck_run memcheck 150 'Fp8GemmGpu.WgmmaSplitK*:Fp8GemmGpu.LinearPair*'
timeout 120 "$B/dserve_fp8_gemm_bench" --filter lite_ --ms 8,16,24,32,48,64 > "$OUT/bench_lite.log" 2>&1
echo "== bench_lite rc=$?"
grep -E "device|splits|wgmma|ours|cublaslt_fp8" "$OUT/bench_lite.log" | grep -v "^dispatch" | head -80
timeout 150 "$B/dserve_fp8_gemm_bench" --ms 1,8,16,32,64 > "$OUT/bench_v3.log" 2>&1
echo "== bench_v3 rc=$?"
grep -E "splits|wgmma|ours|cublaslt_fp8" "$OUT/bench_v3.log" | grep -v lite_ | head -120
AB_BATCHES=32,64 AB_KINDS="fp8" AB_BINS="wg lt" AB_CFG_wg=base AB_CFG_lt=DSERVE_FP8_WGMMA=0 AB_ROUNDS=2 \
  bash "$(dirname "$0")/abbin.sh"
