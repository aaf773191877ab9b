#!/usr/bin/env bash
# Session 32 (~300 s; binaries dserve, ds_ops_cuda_gpu_test): (1) the whole GPU suite after removing the opt-ins
# s32a measured without gain (DSERVE_SMALL_M_WIDE_NT2, DSERVE_MOE_SMALL_GATE_UNROLL, DSERVE_MLA_T16_PATCH), with the
# graph arena's recapture path now tested (DSERVE_GRAPH_ARENA_FIRST_KIB); (2) bf16 batch 1, two rounds alternating:
# the marginal chain cost of the plain norm, the routing launch and the split combine with W_UV (DSERVE_DUP_KERNELS:
# each launched twice), beside the MoE-summing norm's (s32b: +0.06-0.08 ms a step, ~2.5 us a launch).
set -u
source "$(dirname "$0")/lib.sh"
bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
D=DSERVE_DUP_KERNELS
AB_BATCHES=1 AB_CONFIGS="base $D=rms_norm_vec_kernelILi1ELb0E $D=moe_route_permute_fast $D=mla_combine_vc base $D=rms_norm_vec_kernelILi1ELb0E $D=moe_route_permute_fast $D=mla_combine_vc" \
  OUT=$OUT/dup bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base" OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
