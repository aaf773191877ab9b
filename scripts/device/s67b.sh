#!/usr/bin/env bash
# Session 67: /update_weights_from_disk on the GPU (CudaWeightUpdate: bf16, FP8 with hidden 192, FP8 with the MoE in
# e4m3; against fresh engines, under CUDA graphs) and the expert recorder again, under compute-sanitizer memcheck
# (the plain runs are in the same call's gpusuite). Binaries: ds_ops_cuda_gpu_test (~150 s).
set -u
source "$(dirname "$0")/lib.sh"
memcheck_run mc_update 240 'Fixtures/CudaWeightUpdate.*:CudaGraphExperts.*'
grep -hE "^WEIGHT UPDATE" "$OUT/mc_update.log" | head -4
