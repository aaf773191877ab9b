#!/usr/bin/env bash
# Session 36 (~130 s; binary dserve from main): what each link of the FP8 batch-1 chain costs now (DSERVE_DUP_KERNELS:
# the named kernel family launched twice, back to back, so the step grows by its marginal cost inside the PDL
# chain; s32b / s32d measured bf16). V2-Lite --quantization fp8, batch 1, base runs first, middle and last.
set -u
source "$(dirname "$0")/lib.sh"
D=DSERVE_DUP_KERNELS
AB_EXTRA="--quantization fp8" AB_BATCHES=1 AB_CONFIGS="base $D=rms_norm_vec_kernelILi1ELb0 $D=rms_norm_vec_kernelILi1ELb1 \
$D=gemm_small_m_nk_kernel $D=moe_route_permute base $D=quant_act_kernel $D=mla_absorb_prep_kernel \
$D=mla_decode_t16_kernel $D=mla_combine_vc_kernel base" bash "$(dirname "$0")/ab.sh"
