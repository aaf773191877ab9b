// MoE routing and permutation kernels (see moe.h). Routing follows CpuOps::moe_route step by step,
// including the double-precision softmax sum and the order of the selected experts.
#include <algorithm>

#include <cuda_bf16.h>

#include "kernels/moe.h"
#include "kernels/moe_route.cuh"
#include "kernels/moe_sum.cuh"
#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

using moe_detail::permute_block;
using moe_detail::permute_smem_bytes;
using moe_detail::route_smem_per_warp;
using moe_detail::route_token;

constexpr int kRouteWarps = 4;  // tokens per block (one warp each)

__global__ void moe_route_kernel(MoeRouteParams p) {
  pdl_enter();
  extern __shared__ __align__(16) char route_smem[];
  const int warp = threadIdx.x >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= p.tokens) return;  // whole warps only: routing syncs warps, never the block
  route_token(p, t, route_smem + warp * route_smem_per_warp(p.experts, p.n_group, p.top_k));
}

__global__ void moe_permute_kernel(MoePermuteParams p) {
  pdl_enter();
  extern __shared__ int32_t perm_smem[];
  __shared__ uint64_t warp_tot[32];
  permute_block(p, perm_smem, warp_tot);
}

__global__ void moe_count_kernel(MoeCountParams p) {
  pdl_enter();
  extern __shared__ int32_t count_smem[];
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) count_smem[e] = 0;
  __syncthreads();
  int64_t rows = p.tokens;
  if (p.real_rows) rows = min(rows, static_cast<int64_t>(max(*p.real_rows, 0)));
  const int64_t n = rows * p.width;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t id = p.topk_ids[i];
    if (id >= 0 && id < p.experts) atomicAdd(&count_smem[id], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x)
    if (count_smem[e]) atomicAdd(&p.counts[e], count_smem[e]);
}

__global__ void moe_record_kernel(MoeRecordParams p) {
  pdl_enter();
  const int64_t n = p.tokens * p.k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / p.k;
    const int j = static_cast<int>(i % p.k);
    p.out[t * p.out_stride + p.column + j] = p.topk_ids[t * p.width + j];
  }
}

constexpr int kRoutePermuteWarps = 8;

// One CTA: warp w routes tokens w, w + 8, ...; once every id is written (the block barrier also makes the block's
// global writes visible to it), the whole block groups them.
__global__ void __launch_bounds__(kRoutePermuteWarps * 32) moe_route_permute_kernel(const MoeRouteParams r,
                                                                                   const MoePermuteParams g) {
  pdl_enter();
  extern __shared__ __align__(16) char rp_smem[];
  __shared__ uint64_t warp_tot[32];
  const int warp = threadIdx.x >> 5;
  const size_t per_warp = route_smem_per_warp(r.experts, r.n_group, r.top_k);
  for (int64_t t = warp; t < r.tokens; t += kRoutePermuteWarps) route_token(r, t, rp_smem + warp * per_warp);
  __syncthreads();
  permute_block(g, reinterpret_cast<int32_t*>(rp_smem), warp_tot);
}

// The same with register routing (route_token_fast) and the grouping by counting (store_grouping): the decode
// default where it fits (route_fast_fits); DSERVE_MOE_ROUTE_FAST=0 keeps the kernel above (A/B runs). Alone
// (graph replays, one token) 2.92 vs 7.49 us V2-Lite, 6.11 vs 15.4 us V3; V2-Lite bench-one-batch batch 1 2.85 /
// 2.86 vs 2.95 / 2.95 ms (H100, 2026-11-27, BENCHMARKS.md).
template <int J>
__global__ void __launch_bounds__(kRoutePermuteWarps * 32) moe_route_permute_fast_kernel(const MoeRouteParams r,
                                                                                        const MoePermuteParams g) {
  __shared__ int32_t ids_s[kMoeRoutePermuteMaxTokens * 32];
  __shared__ uint32_t mask_s[moe_detail::kRouteMaskWords];
  __shared__ float gsm[kRoutePermuteWarps][32 * J];
  float bias[J];
  moe_detail::load_route_bias<J>(r, bias);  // a weight: before the wait
  if (threadIdx.x < moe_detail::kRouteMaskWords) mask_s[threadIdx.x] = 0;
  pdl_enter();
  moe_detail::route_and_group_fast<J>(r, g, bias, kRoutePermuteWarps, ids_s, mask_s, &gsm[0][0]);
}

// The routing launch with register routing (route_token_fast): one warp a token, kRouteWarps tokens a CTA; the
// default past moe_route_permute's 16 tokens (batch 64 / 256 decode, prefill) where it fits, DSERVE_MOE_ROUTE_FAST=0
// keeps moe_route_kernel.
template <int J>
__global__ void __launch_bounds__(kRouteWarps * 32) moe_route_fast_kernel(const MoeRouteParams p) {
  __shared__ float gsm[kRouteWarps][32 * J];
  float bias[J];
  moe_detail::load_route_bias<J>(p, bias);  // a weight: before the wait
  pdl_enter();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= p.tokens) return;  // whole warps only
  int32_t id;
  float w;
  moe_detail::route_token_fast<J>(p, t, bias, gsm[warp], &id, &w);
  const int W = route_width(p);
  if (lane < W) {
    p.topk_ids[t * W + lane] = id;
    p.topk_weights[t * W + lane] = w;
  }
}

size_t route_permute_smem(const MoeRouteParams& r) {
  const size_t route = kRoutePermuteWarps * route_smem_per_warp(r.experts, r.n_group, r.top_k);
  const size_t perm = permute_smem_bytes(r.experts + r.shared);  // the grouping's experts
  return route > perm ? route : perm;
}

__global__ void gather_rows_kernel(const __nv_bfloat16* x, const int32_t* src, __nv_bfloat16* out, int64_t dim) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const __nv_bfloat16* in = x + static_cast<int64_t>(src[r]) * dim;
  __nv_bfloat16* o = out + r * dim;
  if (dim % 8 == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) & 15) == 0) {
    for (int64_t i = threadIdx.x; i < dim / 8; i += blockDim.x)
      reinterpret_cast<uint4*>(o)[i] = reinterpret_cast<const uint4*>(in)[i];
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = in[i];
  }
}

// Fallback: one block per token, any alignment and top_k.
__global__ void moe_combine_kernel(MoeCombineParams p) {
  moe_detail::sum_pdl_enter(p);
  const int64_t t = blockIdx.x;
  const __nv_bfloat16* y = static_cast<const __nv_bfloat16*>(p.y);
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + t * p.dim;
  for (int64_t c = threadIdx.x; c < p.dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < p.top_k; ++k) {
      const int32_t row = p.row_of[t * p.top_k + k];
      if (row >= 0) acc += p.weights[t * p.top_k + k] * __bfloat162float(y[static_cast<int64_t>(row) * p.dim + c]);
    }
    if (p.addend)
      acc += p.addend_f32 ? __ldcg(static_cast<const float*>(p.addend) + t * p.dim + c)
                          : __bfloat162float(__ldcg(static_cast<const __nv_bfloat16*>(p.addend) + t * p.dim + c));
    out[c] = __float2bfloat16(acc);
  }
}

constexpr int kCombineThreads = 128;
constexpr int kCombineMaxTopK = moe_detail::kSumMaxTopK;  // larger top_k takes the fallback

// 8 columns (16 bytes) per thread, blocks of kCombineThreads * 8 columns, flattened (token, column block)
// grid: a decode step gets dim / 1024 blocks per token and every thread has its top_k loads in flight at
// once. Same fp32 sum in the same k order as the fallback (moe_sum.cuh).
// With ids_settled, the rows and weights are read before the PDL wait, so after it the expert rows and the addend
// go out in one round.
__global__ void __launch_bounds__(kCombineThreads) moe_combine_vec_kernel(MoeCombineParams p, int col_blocks) {
  __shared__ int32_t rows[kCombineMaxTopK];
  __shared__ float wts[kCombineMaxTopK];
  const int64_t t = blockIdx.x / col_blocks;
  const int64_t c8 = static_cast<int64_t>(blockIdx.x % col_blocks) * kCombineThreads + threadIdx.x;
  moe_detail::sum_enter_with_ids(p, t, rows, wts);
  if (c8 * 8 >= p.dim) return;
  moe_detail::SumChunk s;
  moe_detail::sum_chunk_load(p, t, c8, rows, s);
  reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + t * p.dim)[c8] =
      moe_detail::sum_chunk_reduce(p, rows, wts, s);
}

__global__ void moe_addend_signal_kernel(uint32_t* ready) {
  pdl_enter();  // the addend's writer has completed and its writes are visible
  if (threadIdx.x == 0) asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(ready), "r"(1u) : "memory");
}

}  // namespace

cudaError_t launch_moe_addend_signal(uint32_t* ready, cudaStream_t stream) {
  if (!ready) return cudaErrorInvalidValue;
  return launch_pdl(moe_addend_signal_kernel, 1, 32, 0, stream, ready);
}

cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  if (p.n_group < 1 || p.experts % p.n_group != 0 || p.n_group > 64 || p.top_k > p.experts || p.shared < 0)
    return cudaErrorInvalidValue;
  const size_t smem = kRouteWarps * route_smem_per_warp(p.experts, p.n_group, p.top_k);
  if (smem > 48 * 1024) return cudaErrorInvalidValue;
  const int64_t blocks = (p.tokens + kRouteWarps - 1) / kRouteWarps;
  if (blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  if (const int J = moe_detail::route_fast_launch_j(p))
    return J == 2 ? launch_pdl(moe_route_fast_kernel<2>, static_cast<unsigned>(blocks), 32 * kRouteWarps, 0, stream, p)
                  : launch_pdl(moe_route_fast_kernel<8>, static_cast<unsigned>(blocks), 32 * kRouteWarps, 0, stream, p);
  return launch_pdl(moe_route_kernel, static_cast<unsigned>(blocks), 32 * kRouteWarps, smem, stream, p);
}

bool moe_route_permute_supported(const MoeRouteParams& r, const MoePermuteParams& g) {
  return r.logits && r.topk_ids && r.topk_weights && r.tokens >= 1 && r.tokens <= kMoeRoutePermuteMaxTokens &&
         r.experts >= 1 && r.n_group >= 1 && r.experts % r.n_group == 0 && r.n_group <= 64 && r.top_k >= 1 &&
         r.top_k <= r.experts && r.shared >= 0 && g.topk_ids == r.topk_ids && g.experts == r.experts + r.shared &&
         g.top_k == route_width(r) && g.entries == r.tokens * route_width(r) && route_width(r) <= 32 && g.counts &&
         g.offsets && g.row_of && g.src_token && moe_detail::slots_ok(g) && route_permute_smem(r) <= 48 * 1024;
}

cudaError_t launch_moe_route_permute(const MoeRouteParams& r, const MoePermuteParams& g, cudaStream_t stream) {
  if (!moe_route_permute_supported(r, g)) return cudaErrorInvalidValue;
  if (const int J = moe_detail::route_fast_launch_j(r))
    return J == 2 ? launch_pdl(moe_route_permute_fast_kernel<2>, 1, kRoutePermuteWarps * 32, 0, stream, r, g)
                  : launch_pdl(moe_route_permute_fast_kernel<8>, 1, kRoutePermuteWarps * 32, 0, stream, r, g);
  return launch_pdl(moe_route_permute_kernel, 1, kRoutePermuteWarps * 32, route_permute_smem(r), stream, r, g);
}

cudaError_t launch_moe_permute(const MoePermuteParams& p, cudaStream_t stream) {
  const size_t smem = permute_smem_bytes(p.experts);
  if (p.experts < 1 || smem > 48 * 1024 || !moe_detail::slots_ok(p)) return cudaErrorInvalidValue;
  return launch_pdl(moe_permute_kernel, 1, 1024, smem, stream, p);
}

cudaError_t launch_moe_count_experts(const MoeCountParams& p, cudaStream_t stream) {
  const size_t smem = sizeof(int32_t) * static_cast<size_t>(p.experts);
  if (p.experts < 1 || p.width < 1 || p.tokens < 0 || smem > 48 * 1024 || !p.topk_ids || !p.counts)
    return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((p.tokens * p.width + 255) / 256, 32);
  return launch_pdl(moe_count_kernel, static_cast<unsigned>(blocks), 256, smem, stream, p);
}

cudaError_t launch_moe_record_ids(const MoeRecordParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.k < 0 || p.k > p.width || p.column < 0 || p.column + p.k > p.out_stride || !p.topk_ids ||
      !p.out)
    return cudaErrorInvalidValue;
  if (p.tokens == 0 || p.k == 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((p.tokens * p.k + 255) / 256, 64);
  return launch_pdl(moe_record_kernel, static_cast<unsigned>(blocks), 256, 0, stream, p);
}

cudaError_t launch_gather_rows(const void* x, const int32_t* src, void* out, int64_t rows, int64_t dim,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return launch_pdl(gather_rows_kernel, static_cast<unsigned>(rows), 128, 0, stream,
                    static_cast<const __nv_bfloat16*>(x), src, static_cast<__nv_bfloat16*>(out), dim);
}

cudaError_t launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  const bool vec = p.dim % 8 == 0 && p.top_k <= kCombineMaxTopK &&
                   ((reinterpret_cast<uintptr_t>(p.y) | reinterpret_cast<uintptr_t>(p.out) |
                     reinterpret_cast<uintptr_t>(p.addend)) & 15) == 0;
  if (vec) {
    const int col_blocks = static_cast<int>((p.dim / 8 + kCombineThreads - 1) / kCombineThreads);
    const int64_t blocks = p.tokens * col_blocks;
    if (blocks < (int64_t{1} << 31)) {
      return launch_pdl(moe_combine_vec_kernel, static_cast<unsigned>(blocks), kCombineThreads, 0, stream, p, col_blocks);
    }
  }
  return launch_pdl(moe_combine_kernel, static_cast<unsigned>(p.tokens), 256, 0, stream, p);
}

}  // namespace ds::kernels
