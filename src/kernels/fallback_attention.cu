// TEMPORARY simple MLA attention (see fallback_attention.h).
#include <cuda_bf16.h>

#include "kernels/block_reduce.cuh"
#include "kernels/fallback_attention.h"
#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ float bf(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

__global__ void fallback_attention_kernel(FallbackAttnParams p) {
  __shared__ float scratch[33];
  const int64_t t = blockIdx.x / p.heads, h = blockIdx.x % p.heads;
  int s = 0;
  while (s + 1 < p.num_seqs && p.q_starts[s + 1] <= t) ++s;
  const int len = p.seq_lens[s];
  const int limit = min(p.positions[t] + 1, len);  // causal by position
  int64_t ctx_base = 0;
  for (int i = 0; i < s; ++i) ctx_base += p.seq_lens[i];
  const int n_cand = p.topk ? p.topk_k : limit;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) + (t * p.heads + h) * p.dq;
  const __nv_bfloat16* kv = static_cast<const __nv_bfloat16*>(p.kv);
  const __nv_bfloat16* ctx = static_cast<const __nv_bfloat16*>(p.ctx);
  const __nv_bfloat16* cache = static_cast<const __nv_bfloat16*>(p.cache);
  float* sc = p.scores + blockIdx.x * static_cast<int64_t>(p.max_cand);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto position = [&](int c) { return p.topk ? p.topk[t * p.topk_k + c] : c; };
  auto cache_row = [&](int j) {
    const int64_t slot = static_cast<int64_t>(p.block_table[s * p.max_pages + j / p.page_size]) * p.page_size +
                         j % p.page_size;
    return cache + slot * p.dq;
  };
  for (int c = warp; c < n_cand; c += kThreads / 32) {
    const int j = position(c);
    float d = 0.0f;
    const bool ok = j >= 0 && j < limit;
    if (ok) {
      if (p.absorbed) {
        const __nv_bfloat16* row = cache_row(j);
        for (int64_t i = lane; i < p.dq; i += 32) d += bf(q, i) * bf(row, i);
      } else {
        const __nv_bfloat16* k = kv + ((ctx_base + j) * p.heads + h) * (p.nope + p.v);
        const __nv_bfloat16* kr = ctx + (ctx_base + j) * p.ctx_dim + p.rope_offset;
        for (int64_t i = lane; i < p.nope; i += 32) d += bf(q, i) * bf(k, i);
        for (int64_t i = lane; i < p.dq - p.nope; i += 32) d += bf(q, p.nope + i) * bf(kr, i);
      }
    }
    d = warp_sum(d);
    if (lane == 0) sc[c] = ok ? d * p.scale : -INFINITY;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < n_cand; c += kThreads) mx = fmaxf(mx, sc[c]);
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int c = threadIdx.x; c < n_cand; c += kThreads) sum += sc[c] == -INFINITY ? 0.0f : expf(sc[c] - mx);
  sum = block_sum(sum, scratch);
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + (t * p.heads + h) * p.v;
  if (p.lse && threadIdx.x == 0) p.lse[t * p.heads + h] = sum > 0.0f ? mx + logf(sum) : -INFINITY;
  for (int64_t i = threadIdx.x; i < p.v; i += kThreads) {
    float acc = 0.0f;
    for (int c = 0; c < n_cand; ++c) {
      if (sc[c] == -INFINITY) continue;
      const int j = position(c);
      const float w = expf(sc[c] - mx);
      const float val = p.absorbed ? bf(cache_row(j), i) : bf(kv + ((ctx_base + j) * p.heads + h) * (p.nope + p.v) + p.nope, i);
      acc += w * val;
    }
    out[i] = __float2bfloat16(sum > 0.0f ? acc / sum : 0.0f);
  }
}

}  // namespace

cudaError_t launch_fallback_attention(const FallbackAttnParams& p, cudaStream_t stream) {
  if (p.tokens * p.heads == 0) return cudaSuccess;
  return launch_plain(fallback_attention_kernel, static_cast<unsigned>(p.tokens * p.heads), kThreads, 0, stream, p);
}

}  // namespace ds::kernels
