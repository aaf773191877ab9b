// TEMPORARY simple MLA attention (kernels/fallback_attention.cu) with the signatures of ops/cuda/attention.h:
// a cross-check for the real MLA kernels (CudaOps uses it when DSERVE_CUDA_ATTENTION=fallback) and their
// stand-in while no src/ops/cuda/attention*.cpp exists. Delete once the MLA kernels are settled.
#pragma once
#include <cuda_runtime.h>

#include "ops/ops.h"

namespace ds {

Tensor cuda_mla_attention_mha_fallback(const Tensor& q, const Tensor& kv, const Tensor& ctx, int64_t rope_offset,
                                       const AttnMetadata& m, float scale, const Tensor* topk, cudaStream_t stream,
                                       Tensor* lse = nullptr);
Tensor cuda_mla_attention_absorbed_fallback(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                            float scale, const Tensor* topk, cudaStream_t stream);

}  // namespace ds
