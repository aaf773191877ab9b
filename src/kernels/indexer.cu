// Lightning-indexer scores and top-k selection (see indexer.h).
#include <cuda_bf16.h>

#include "kernels/block_reduce.cuh"
#include "kernels/indexer.h"
#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kPositionsPerBlock = 64;
constexpr int kSelectThreads = 1024;

__device__ __forceinline__ int seq_of(const int32_t* q_starts, int num_seqs, int64_t t) {
  int lo = 0, hi = num_seqs - 1;  // largest s with q_starts[s] <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (q_starts[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

__global__ void indexer_scores_kernel(IndexerParams p) {
  extern __shared__ float sq[];  // [heads * dim] q as fp32, then [heads] scaled weights
  float* sw = sq + p.heads * p.dim;
  const int64_t r = blockIdx.x, t = p.token_begin + r;
  const int n = p.positions[t] + 1;
  const int first = blockIdx.y * kPositionsPerBlock;
  if (first >= n) return;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) + t * p.heads * p.dim;
  for (int64_t i = threadIdx.x; i < p.heads * p.dim; i += blockDim.x) sq[i] = __bfloat162float(q[i]);
  for (int64_t h = threadIdx.x; h < p.heads; h += blockDim.x)
    sw[h] = (p.w_f32 ? static_cast<const float*>(p.w)[t * p.heads + h]
                     : __bfloat162float(static_cast<const __nv_bfloat16*>(p.w)[t * p.heads + h])) * p.w_scale;
  __syncthreads();
  const int s = seq_of(p.q_starts, p.num_seqs, t);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int last = min(n, first + kPositionsPerBlock);
  for (int j = first + warp; j < last; j += kScoreThreads / 32) {
    const int64_t slot = static_cast<int64_t>(p.block_table[s * p.max_pages + j / p.page_size]) * p.page_size +
                         j % p.page_size;
    const __nv_bfloat16* k = static_cast<const __nv_bfloat16*>(p.k_cache) + slot * p.dim;
    float acc = 0.0f;
    for (int64_t h = 0; h < p.heads; ++h) {
      float d = 0.0f;
      for (int64_t c = lane; c < p.dim; c += 32) d += sq[h * p.dim + c] * __bfloat162float(k[c]);
      d = warp_sum(d);
      acc += sw[h] * fmaxf(0.0f, d * p.q_scale);
    }
    if (lane == 0) p.scores[r * p.max_seq_len + j] = acc;
  }
}

// Order-preserving map of a float to uint32 (larger float -> larger key).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__global__ void indexer_select_kernel(IndexerParams p) {
  __shared__ int hist[256];
  __shared__ unsigned long long cand[kIndexerMaxTopk];
  __shared__ int n_cand;
  __shared__ int chosen_bucket, chosen_remaining;
  __shared__ int warp_counts[kSelectThreads / 32];
  const int64_t r = blockIdx.x, t = p.token_begin + r;
  const int n = p.positions[t] + 1;
  const int keep = min(p.topk, n);
  const float* sc = p.scores + r * p.max_seq_len;
  uint32_t prefix = 0, mask = 0;
  int remaining = keep;  // how many of the keys matching prefix/mask are still to take
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
      const uint32_t k = order_key(sc[j]);
      if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 0xFF], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int acc = 0, b = 255;
      for (; b > 0; --b) {
        if (acc + hist[b] >= remaining) break;
        acc += hist[b];
      }
      chosen_bucket = b;
      chosen_remaining = remaining - acc;
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(chosen_bucket) << shift;
    mask |= 0xFFu << shift;
    remaining = chosen_remaining;
    __syncthreads();
  }
  // prefix is the keep-th largest key: take every larger key and the `remaining` lowest positions equal to it.
  if (threadIdx.x == 0) n_cand = 0;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const uint32_t k = order_key(sc[j]);
    if (k > prefix) cand[atomicAdd(&n_cand, 1)] = (static_cast<unsigned long long>(k) << 32) | (0xFFFFFFFFu - j);
  }
  __syncthreads();
  int taken = 0;  // ties taken so far (uniform across the block)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int base = 0; base < n && taken < remaining; base += blockDim.x) {
    const int j = base + threadIdx.x;
    const bool tie = j < n && order_key(sc[j]) == prefix;
    const unsigned ballot = __ballot_sync(0xffffffffu, tie);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < kSelectThreads / 32; ++w) {
      if (w < warp) before += warp_counts[w];
      total += warp_counts[w];
    }
    const int rank = taken + before + __popc(ballot & ((1u << lane) - 1));
    const int slot_base = keep - remaining;
    if (tie && rank < remaining) cand[slot_base + rank] = (static_cast<unsigned long long>(prefix) << 32) | (0xFFFFFFFFu - j);
    taken += total;
    __syncthreads();
  }
  // Bitonic sort of the keep candidates, descending (score, then lower position first).
  int size = 1;
  while (size < keep) size <<= 1;
  for (int i = keep + threadIdx.x; i < size; i += blockDim.x) cand[i] = 0ull;
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const int partner = i ^ j;
        if (partner > i) {
          const bool desc = (i & k) == 0;
          const unsigned long long a = cand[i], b = cand[partner];
          if (desc ? a < b : a > b) {
            cand[i] = b;
            cand[partner] = a;
          }
        }
      }
      __syncthreads();
    }
  int32_t* out = p.out + t * p.topk;
  for (int k = threadIdx.x; k < p.topk; k += blockDim.x)
    out[k] = k < keep ? static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(cand[k] & 0xFFFFFFFFull)) : -1;
}

}  // namespace

cudaError_t launch_indexer_topk(const IndexerParams& p, cudaStream_t stream) {
  if (p.token_count == 0) return cudaSuccess;
  if (p.topk > kIndexerMaxTopk || p.topk < 1) return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * (p.heads * p.dim + p.heads);
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(indexer_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  dim3 grid(static_cast<unsigned>(p.token_count),
            static_cast<unsigned>((p.max_seq_len + kPositionsPerBlock - 1) / kPositionsPerBlock));
  if (const cudaError_t e = launch_plain(indexer_scores_kernel, grid, kScoreThreads, smem, stream, p); e != cudaSuccess)
    return e;
  return launch_plain(indexer_select_kernel, static_cast<unsigned>(p.token_count), kSelectThreads, 0, stream, p);
}

}  // namespace ds::kernels
