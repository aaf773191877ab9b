#!/usr/bin/env bash
# Prepared in session 31 (~300 s; binaries dserve, ds_ops_cuda_gpu_test): (0) the small-M and
# bf16 MoE GPU tests (DSERVE_SMALL_M_WIDE_NT2's and DSERVE_MOE_SMALL_GATE_UNROLL=8's cases were compiled in session
# 31, never run); (1) bf16 batch 1 / 8 with the
# small-M kernel's rounds of 8 also for grids of two CTAs an SM (DSERVE_SMALL_M_WIDE_PRE=2: V2-Lite's o_proj, 256
# CTAs, stages its whole K before the PDL wait) and with two tiles a CTA in rounds of 8 (DSERVE_SMALL_M_WIDE_NT2=1:
# the q / kv_a pair, o_proj, shared down) and with the routed gate|up in one round of 8 chunks a warp
# (DSERVE_MOE_SMALL_GATE_UNROLL=8) against the default, two rounds alternating;
# (2) FP8 batch 1 / 8 with the shared MLP forked before the routing again (DSERVE_SHARED_AFTER_ROUTE=0) now that the
# routing chain reads no cold constants, two rounds. s32b.sh: the traces and the norm's marginal cost.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='GemmSmallM*:DecodeKernel/MoeGroupedBothKernels.*' SUITE_LIMIT=100 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
W2=DSERVE_SMALL_M_WIDE_PRE=2 NT2=DSERVE_SMALL_M_WIDE_NT2=1 G8=DSERVE_MOE_SMALL_GATE_UNROLL=8
AB_BATCHES=1,8 AB_CONFIGS="base $W2 $NT2 $G8 base $W2 $NT2 $G8" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_SHARED_AFTER_ROUTE=0 base DSERVE_SHARED_AFTER_ROUTE=0" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
