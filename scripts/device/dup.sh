#!/usr/bin/env bash
# Measurement (issue 6; DSERVE_DUP_KERNELS, kernels/pdl.cuh): each kernel family launched twice in the decode step
# (DSERVE_DUP_KERNELS=<substring of the mangled name>), bench-one-batch V2-Lite bf16 at batch 1 (DUP_BATCHES), base
# runs between: (step with the duplicate - base) / launches per step = that kernel's marginal cost in the real chain
# (PDL overlap included). Launches per step at batch 1: norms 55, the NT=1 small-M GEMMs 107 (q|kv_a pair, o_proj,
# shared down, router), the rest 26-27. Logs: $OUT/*.log.
set -u
D=DSERVE_DUP_KERNELS
K1="gemm_small_m_nk_kernelILi1ELb0ELb0ELb1E" K2="gemm_small_m_nk_kernelILi2ELb0ELb1ELb1E"
AB_BATCHES=${DUP_BATCHES:-1} AB_CONFIGS="base $D=rms_norm_vec_kernel $D=$K1 $D=$K2 $D=mla_absorb_prep_kernel base \
$D=mla_decode_t16_kernel $D=mla_combine_vc_kernel $D=moe_route_permute base $D=moe_small_m_kernelILb1 \
$D=moe_small_m_kernelILb0 $D=moe_combine_vec_kernel base" bash "$(dirname "$0")/ab.sh"
