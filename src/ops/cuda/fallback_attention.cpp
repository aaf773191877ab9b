// TEMPORARY: MLA attention on a simple kernel (kernels/fallback_attention.cu), see fallback_attention.h. The
// attention.h entry points are defined here only while no src/ops/cuda/attention*.cpp exists (CMake defines
// DSERVE_ATTENTION_FALLBACK then), so the real MLA kernels replace them without a link clash.
#include "ops/cuda/fallback_attention.h"

#include <algorithm>

#include "kernels/fallback_attention.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

kernels::FallbackAttnParams base_params(const Tensor& q, const AttnMetadata& m, float scale, const Tensor* topk) {
  DS_CHECK(q.ndim() == 3 && q.dtype() == DType::kBF16 && q.device() == Device::kCuda, "attention q ", q.describe());
  kernels::FallbackAttnParams p{};
  p.q = q.data();
  p.positions = m.positions.data_as<int32_t>();
  p.q_starts = m.q_starts.data_as<int32_t>();
  p.seq_lens = m.seq_lens.data_as<int32_t>();
  p.block_table = m.block_table.data_as<int32_t>();
  p.topk = topk ? topk->data_as<int32_t>() : nullptr;
  p.topk_k = topk ? static_cast<int>(topk->dim(1)) : 0;
  p.tokens = q.dim(0);
  p.heads = q.dim(1);
  p.dq = q.dim(2);
  p.max_pages = m.block_table.dim(1);
  p.num_seqs = m.num_seqs;
  p.page_size = m.page_size;
  p.max_cand = std::max(1, topk ? p.topk_k : m.max_seq_len);
  p.scale = scale;
  return p;
}

Tensor run(kernels::FallbackAttnParams p, int64_t v, cudaStream_t stream) {
  Tensor out = Tensor::empty({p.tokens, p.heads, v}, DType::kBF16, Device::kCuda);
  Tensor scratch = Tensor::empty({p.tokens * p.heads, p.max_cand}, DType::kF32, Device::kCuda);
  p.out = out.data();
  p.scores = scratch.data_as<float>();
  p.v = v;
  DS_CUDA_CHECK(kernels::launch_fallback_attention(p, stream));
  return out;
}

}  // namespace

Tensor cuda_mla_attention_mha_fallback(const Tensor& q, const Tensor& kv, const Tensor& ctx, int64_t rope_offset,
                                       const AttnMetadata& m, float scale, const Tensor* topk, cudaStream_t stream,
                                       Tensor* lse) {
  kernels::FallbackAttnParams p = base_params(q, m, scale, topk);
  const int64_t rope = ctx.dim(1) - rope_offset;
  p.nope = p.dq - rope;
  const int64_t v = kv.dim(2) - p.nope;
  DS_CHECK(kv.dim(1) == p.heads && kv.dim(0) == ctx.dim(0) && rope > 0 && v > 0, "mla_attention_mha q ", q.describe(),
           " kv ", kv.describe(), " ctx ", ctx.describe());
  p.kv = kv.data();
  p.ctx = ctx.data();
  p.ctx_dim = ctx.dim(1);
  p.rope_offset = rope_offset;
  if (lse) {
    *lse = Tensor::empty({p.tokens, p.heads}, DType::kF32, Device::kCuda);
    p.lse = lse->data_as<float>();
  }
  return run(p, v, stream);
}

Tensor cuda_mla_attention_absorbed_fallback(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                            float scale, const Tensor* topk, cudaStream_t stream) {
  kernels::FallbackAttnParams p = base_params(q, m, scale, topk);
  DS_CHECK(cache.dtype() == DType::kBF16, "DSERVE_CUDA_ATTENTION=fallback reads bf16 latent caches only, got ",
           cache.describe(), " (use --kv-cache-dtype auto with it)");
  DS_CHECK(cache.dim(1) == p.dq && v_dim <= p.dq, "absorbed attention q ", q.describe(), " cache ", cache.describe());
  p.absorbed = true;
  p.cache = cache.data();
  return run(p, v_dim, stream);
}

#ifdef DSERVE_ATTENTION_FALLBACK
Tensor cuda_mla_attention_mha(const Tensor& q, const Tensor& kv, const Tensor& ctx, int64_t rope_offset,
                              const AttnMetadata& m, float scale, const Tensor* topk, cudaStream_t stream, Tensor* lse) {
  return cuda_mla_attention_mha_fallback(q, kv, ctx, rope_offset, m, scale, topk, stream, lse);
}
Tensor cuda_mla_attention_absorbed(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                   float scale, const Tensor* topk, cudaStream_t stream) {
  return cuda_mla_attention_absorbed_fallback(q, cache, v_dim, m, scale, topk, stream);
}
#endif  // DSERVE_ATTENTION_FALLBACK

}  // namespace ds
