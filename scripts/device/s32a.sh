#!/usr/bin/env bash
# Prepared in session 31 (~420 s; binaries dserve, ds_ops_cuda_gpu_test). Session 31's opt-in switches, compiled
# there and never run: (0) their GPU tests (small-M GEMMs, bf16 MoE decode kernels, the MLA decode cases incl. the
# delayed-writer test of the t16 patch); (1) bf16 batch 1 / 8, two rounds alternating: base, the small-M rounds of 8
# for grids of two CTAs an SM (DSERVE_SMALL_M_WIDE_PRE=2: o_proj), two tiles a CTA in rounds of 8
# (DSERVE_SMALL_M_WIDE_NT2=1: q / kv_a pair, o_proj, shared down), the routed gate|up in one round of 8
# (DSERVE_MOE_SMALL_GATE_UNROLL=8), the t16 decode's early tile with the new row patched after the wait
# (DSERVE_MLA_T16_PATCH=1); (2) FP8 batch 1 / 8, two rounds: base, the shared MLP forked before the routing again
# (DSERVE_SHARED_AFTER_ROUTE=0), the t16 patch. s32b.sh: the traces and the norm's marginal cost.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='GemmSmallM*:DecodeKernel/MoeGroupedBothKernels.*:*MlaAbsorbedGpu*:MlaDecodeT16.*' SUITE_LIMIT=150 \
  bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
W2=DSERVE_SMALL_M_WIDE_PRE=2 NT2=DSERVE_SMALL_M_WIDE_NT2=1 G8=DSERVE_MOE_SMALL_GATE_UNROLL=8 PT=DSERVE_MLA_T16_PATCH=1
AB_BATCHES=1,8 AB_CONFIGS="base $W2 $NT2 $G8 $PT base $W2 $NT2 $G8 $PT" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
  AB_CONFIGS="base DSERVE_SHARED_AFTER_ROUTE=0 $PT base DSERVE_SHARED_AFTER_ROUTE=0 $PT" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
