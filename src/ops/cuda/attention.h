// MLA attention on the GPU (kernels in src/kernels/mla_*.cu): the two forms of ops/ops.h's
// mla_attention_mha / mla_attention_absorbed with identical semantics, bf16 tensors, fp32 softmax.
// CudaOps (cuda_ops.cpp) forwards to these; they are separate so the kernels can evolve on their own.
#pragma once
#include <cuda_runtime.h>

#include "ops/ops.h"

namespace ds {

// q [T, H, nope + rope] bf16; kv [S, H, nope + v] bf16; ctx [S, D] bf16 (rope at [rope_offset, D));
// topk [T, K] I32 or null. Returns [T, H, v] bf16, allocated on `stream`; lse (or null): [T, H] F32 as Ops's.
Tensor cuda_mla_attention_mha(const Tensor& q, const Tensor& kv, const Tensor& ctx, int64_t rope_offset,
                              const AttnMetadata& m, float scale, const Tensor* topk, cudaStream_t stream,
                              Tensor* lse = nullptr);
// Ops::merge_attention_parts_ on bf16 o [T, H, v] and F32 lse [T, H].
void cuda_merge_attention_parts(Tensor& o, Tensor& lse, const Tensor& o_part, const Tensor& lse_part,
                                cudaStream_t stream);

// The KvFormat (kernels/kv_fp8.h) of a latent cache tensor, told by its dtype: BF16 rows, or the packed rows of
// Ops::empty_latent_cache (F8_E4M3: FlashMLA's layout; F8_E5M2: a plain cast).
int latent_cache_format(const Tensor& cache);

// q [T, H, D] bf16; cache [slots, D] bf16 or packed (latent_cache_format; latent = v_dim), paged by
// m.block_table; value = first v_dim columns.
// Returns [T, H, v_dim] bf16. Must be CUDA-graph capturable for decode (no host sync, no host reads of
// device metadata: use m.max_seq_len / m.max_q_len and device tensors).
Tensor cuda_mla_attention_absorbed(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                   float scale, const Tensor* topk, cudaStream_t stream);

// The same followed by the absorbed W_UV product (w_vc [H, v_dim, v] bf16): at decode sizes with a split plan the
// combine and the product run as one kernel and this returns [T, H, v] with *fused = true (DSERVE_MLA_COMBINE_VC=0:
// never); otherwise it returns the attention's [T, H, v_dim] with *fused = false and the caller multiplies.
// With xq: where fused, v % 128 == 0 and the combine's blocks (H x v / 32) fit one an SM, the same launch also makes
// the [T, H * v] output's block-FP8 quantization for an FP8 consumer (ue8m0 scales or not), bit for bit quant_act's;
// *xq is left undefined where it does not.
Tensor cuda_mla_attention_absorbed_vc(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                      float scale, const Tensor* topk, const Tensor& w_vc, bool* fused,
                                      cudaStream_t stream, Fp8Act* xq = nullptr, bool xq_ue8m0 = false);

}  // namespace ds
