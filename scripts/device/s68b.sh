#!/usr/bin/env bash
# Session 68 (after all.sh gpusuite): return_hidden_states and return_routed_experts through the CUDA graphs
# (CudaGraphHidden) and the routed-id recording op against the CPU (CudaOpsTest.MoeRecordIds) under
# compute-sanitizer memcheck. Binaries: ds_ops_cuda_gpu_test (~120 s).
set -u
source "$(dirname "$0")/lib.sh"
memcheck_run mc_hidden 300 'CudaGraphHidden.*:CudaOpsTest.MoeRecordIds'
grep -hE "^GRAPH (hidden|routed)" "$OUT/mc_hidden.log" | head -3
