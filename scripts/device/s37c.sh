#!/usr/bin/env bash
# Session 37, third call (~300 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): the next layer's
# input norm fused into its q / kv_a pair (Ops::rms_norm_open_pair, kernels::launch_gemm_small_m_norm_pair;
# DSERVE_NORM_PAIR = rows, default 1, 0 off). (1) its op test (bit for bit the two launches) + the open-MoE norm
# test, and memcheck on it; (2) the whole GPU suite on the new default; (3) fixtures / graphs with DSERVE_NORM_PAIR=8;
# (4) A/B bf16 batch 1 / 8, three rounds: default vs DSERVE_NORM_PAIR=0 (8 rows too at batch 8);
# (5) one bf16 batch-1 layer's timeline. Prediction: -1.5 to -3 us a MoE layer at batch 1 (0.04-0.08 ms a step).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
gtest_run norm_pair 120 'MoeFp8Test.NormPairMatchesNormThenPair:MoeFp8Test.OpenMoeSummedByTheNorm'
grep -E "Failure|Expected|Which is|: (norm output|residual|q|kv_a)" "$OUT/norm_pair.log" | head -12
timeout 150 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" --gtest_filter='MoeFp8Test.NormPairMatchesNormThenPair' \
  > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
DSERVE_NORM_PAIR=8 GTEST_FILTER='FixtureGpu*:CudaGraph*' SUITE_LIMIT=120 OUT=$OUT/np8 bash "$D/gpusuite.sh" | \
  grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=bf16 AB_ROUNDS=3 AB_BINS="new np0 np8" AB_CFG_np0=DSERVE_NORM_PAIR=0 AB_CFG_np8=DSERVE_NORM_PAIR=8 \
  bash "$D/abbin.sh"
OUT=$OUT/trace_bf16 TRACE_BS=1 TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | \
  sed -n '/^timeline/,$p'
