// MoE routing and permutation kernels (see moe.h). Routing follows CpuOps::moe_route step by step,
// including the double-precision softmax sum and the order of the selected experts.
#include <cuda_bf16.h>

#include "kernels/moe.h"
#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

// a beats b: larger value, then lower index.
__device__ __forceinline__ bool beats(float av, int ai, float bv, int bi) { return av > bv || (av == bv && ai < bi); }

// Warp-wide argmax over (value, index) pairs; lanes with index < 0 hold nothing.
__device__ __forceinline__ void warp_argmax(float& v, int& i) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (oi >= 0 && (i < 0 || beats(ov, oi, v, i))) {
      v = ov;
      i = oi;
    }
  }
}

__device__ __forceinline__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

constexpr int kRouteWarps = 4;  // tokens per block (one warp each)

// One warp per token, kRouteWarps tokens per block. Shared per warp: scores[E], choice[E], taken[E],
// keep[n_group], gscore[n_group], sel_id[top_k], sel_w[top_k] (laid out by route_smem_per_warp).
__host__ __device__ inline size_t route_smem_per_warp(int E, int n_group, int top_k) {
  // floats: scores, choice, gscore, sel_w; ints: sel_id; bytes: taken, keep (rounded up to 16).
  const size_t words = 2 * static_cast<size_t>(E) + n_group + 2 * static_cast<size_t>(top_k);
  const size_t bytes = words * 4 + E + n_group;
  return (bytes + 15) / 16 * 16;
}

__global__ void moe_route_kernel(MoeRouteParams p) {
  pdl_enter();
  extern __shared__ __align__(16) char route_smem[];
  const int E = p.experts, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= p.tokens) return;  // whole warps only: the kernel syncs warps, never the block
  char* base = route_smem + warp * route_smem_per_warp(E, p.n_group, p.top_k);
  float* scores = reinterpret_cast<float*>(base);
  float* choice = scores + E;
  float* gscore = choice + E;
  float* sel_w = gscore + p.n_group;
  int32_t* sel_id = reinterpret_cast<int32_t*>(sel_w + p.top_k);
  char* taken = reinterpret_cast<char*>(sel_id + p.top_k);
  char* keep = taken + E;
  const float* z = p.logits + t * E;
  if (p.sigmoid) {
    // exp in double rounded to float: the correctly rounded expf the CPU reference gets from libm.
    for (int e = lane; e < E; e += 32) scores[e] = 1.0f / (1.0f + static_cast<float>(exp(static_cast<double>(-z[e]))));
  } else {
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32) mx = fmaxf(mx, z[e]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    // Each exp once (double exp is a long instruction sequence; this kernel is latency-bound at decode).
    constexpr int kMaxPerLane = 8;  // E <= 256
    double ex[kMaxPerLane];
    double sum = 0;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      const int e = lane + 32 * j;
      ex[j] = e < E ? exp(static_cast<double>(z[e] - mx)) : 0.0;
      sum += ex[j];
    }
    for (int e = lane + 32 * kMaxPerLane; e < E; e += 32) sum += exp(static_cast<double>(z[e] - mx));
    sum = warp_sum_d(sum);
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < E) scores[lane + 32 * j] = static_cast<float>(ex[j] / sum);
    for (int e = lane + 32 * kMaxPerLane; e < E; e += 32)
      scores[e] = static_cast<float>(exp(static_cast<double>(z[e] - mx)) / sum);
  }
  for (int e = lane; e < E; e += 32) {
    choice[e] = scores[e] + (p.bias ? p.bias[e] : 0.0f);
    taken[e] = 0;
  }
  __syncwarp();
  if (p.method != RouteMethod::kGreedy) {
    const int per_group = E / p.n_group, ng = p.n_group;
    // Group score, one lane per group: max (group_limited_greedy) or sum of the top two (noaux_tc). The
    // top two of a multiset do not depend on the scan order; lanes start at different offsets (banks).
    for (int g = lane; g < ng; g += 32) {
      float v0 = -INFINITY, v1 = -INFINITY;
      for (int j = 0; j < per_group; ++j) {
        const float c = choice[g * per_group + (j + g) % per_group];
        if (c > v0) {
          v1 = v0;
          v0 = c;
        } else if (c > v1) {
          v1 = c;
        }
      }
      gscore[g] = p.method == RouteMethod::kNoauxTc ? v0 + (per_group > 1 ? v1 : 0.0f) : v0;
      keep[g] = 0;
    }
    __syncwarp();
    // The best topk_group groups (ties to the lower group): warp argmax over the groups not yet kept.
    for (int k = 0; k < p.topk_group && k < ng; ++k) {
      float v = -INFINITY;
      int i = -1;
      for (int g = lane; g < ng; g += 32)
        if (!keep[g] && (i < 0 || beats(gscore[g], g, v, i))) {
          v = gscore[g];
          i = g;
        }
      warp_argmax(v, i);
      if (lane == 0) keep[i] = 1;
      __syncwarp();
    }
    for (int e = lane; e < E; e += 32)
      if (!keep[e / per_group]) choice[e] = -INFINITY;
    __syncwarp();
  }
  double sum = 0;
  for (int k = 0; k < p.top_k; ++k) {
    float v = -INFINITY;
    int i = -1;
    for (int e = lane; e < E; e += 32)
      if (!taken[e] && (i < 0 || beats(choice[e], e, v, i))) {
        v = choice[e];
        i = e;
      }
    warp_argmax(v, i);  // every lane ends with the same (v, i)
    if (lane == 0) {
      taken[i] = 1;
      sel_id[k] = i;
      sel_w[k] = scores[i];  // weights use the unbiased scores
    }
    sum += scores[i];
    __syncwarp();
  }
  int32_t* ids = p.topk_ids + t * p.top_k;
  float* wts = p.topk_weights + t * p.top_k;
  for (int k = lane; k < p.top_k; k += 32) {
    float w = sel_w[k];
    if (p.norm_topk_prob) w = static_cast<float>(w / (sum + 1e-20));
    ids[k] = sel_id[k];
    wts[k] = w * p.routed_scaling_factor;
  }
}

// Block-wide exclusive scan of a 64-bit value (any blockDim multiple of 32, <= 1024); returns the exclusive
// prefix and sets *total. `warp_tot` holds 32 values.
__device__ __forceinline__ uint64_t block_exclusive_scan(uint64_t v, uint64_t* warp_tot, uint64_t* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  uint64_t inc = v;
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t n = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += n;
  }
  if (lane == 31) warp_tot[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    uint64_t w = lane < warps ? warp_tot[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const uint64_t n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    if (lane < warps) warp_tot[lane] = w;  // inclusive prefix of the warp totals
  }
  __syncthreads();
  *total = warp_tot[warps - 1];
  return inc - v + (warp > 0 ? warp_tot[warp - 1] : 0);
}

// One block: counts with shared-memory atomics, a parallel scan for the offsets and the active list, then
// rows from shared cursors. Shared: counts[E], cursor[E].
__global__ void moe_permute_kernel(MoePermuteParams p) {
  pdl_enter();
  extern __shared__ int32_t perm_smem[];
  __shared__ uint64_t warp_tot[32];
  int32_t* counts = perm_smem;
  int32_t* cursor = perm_smem + p.experts;
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < p.entries; i += blockDim.x) {
    const int e = p.topk_ids[i];
    if (e >= 0 && e < p.experts) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  // Each thread scans a contiguous run of experts: (rows << 32) | active experts.
  const int per = (p.experts + blockDim.x - 1) / blockDim.x;
  const int e0 = min(p.experts, static_cast<int>(threadIdx.x) * per), e1 = min(p.experts, e0 + per);
  uint64_t mine = 0;
  for (int e = e0; e < e1; ++e) mine += (static_cast<uint64_t>(counts[e]) << 32) | (counts[e] > 0 ? 1u : 0u);
  uint64_t total;
  const uint64_t before = block_exclusive_scan(mine, warp_tot, &total);
  int32_t acc = static_cast<int32_t>(before >> 32), n_active = static_cast<int32_t>(before & 0xffffffffu);
  for (int e = e0; e < e1; ++e) {
    const int32_t c = counts[e];
    p.counts[e] = c;
    p.offsets[e] = acc;
    cursor[e] = acc;
    if (p.active && c > 0) p.active[n_active++] = e;
    acc += c;
  }
  if (p.num_active && threadIdx.x == 0) *p.num_active = static_cast<int32_t>(total & 0xffffffffu);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < p.entries; i += blockDim.x) {
    const int e = p.topk_ids[i];
    if (e >= 0 && e < p.experts) {
      const int32_t row = atomicAdd(&cursor[e], 1);
      p.row_of[i] = row;
      p.src_token[row] = static_cast<int32_t>(i / p.top_k);
    } else {
      p.row_of[i] = -1;
    }
  }
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
  pdl_enter();
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
      acc += p.addend_f32 ? static_cast<const float*>(p.addend)[t * p.dim + c]
                          : __bfloat162float(static_cast<const __nv_bfloat16*>(p.addend)[t * p.dim + c]);
    out[c] = __float2bfloat16(acc);
  }
}

constexpr int kCombineThreads = 128;
constexpr int kCombineMaxTopK = 8;  // loads in flight per thread (registers); larger top_k takes the fallback

// 8 columns (16 bytes) per thread, blocks of kCombineThreads * 8 columns, flattened (token, column block)
// grid: a decode step gets dim / 1024 blocks per token and every thread has its top_k loads in flight at
// once. Same fp32 sum in the same k order as the fallback.
__global__ void __launch_bounds__(kCombineThreads) moe_combine_vec_kernel(MoeCombineParams p, int col_blocks) {
  pdl_enter();
  __shared__ int32_t rows[kCombineMaxTopK];
  __shared__ float wts[kCombineMaxTopK];
  const int64_t t = blockIdx.x / col_blocks;
  const int64_t c8 = static_cast<int64_t>(blockIdx.x % col_blocks) * kCombineThreads + threadIdx.x;
  if (threadIdx.x < p.top_k) {
    rows[threadIdx.x] = p.row_of[t * p.top_k + threadIdx.x];
    wts[threadIdx.x] = p.weights[t * p.top_k + threadIdx.x];
  }
  __syncthreads();
  if (c8 * 8 >= p.dim) return;
  float acc[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
  uint4 v[kCombineMaxTopK];
#pragma unroll
  for (int k = 0; k < kCombineMaxTopK; ++k)
    if (k < p.top_k && rows[k] >= 0)
      v[k] = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.y) + static_cast<int64_t>(rows[k]) * p.dim)[c8];
#pragma unroll
  for (int k = 0; k < kCombineMaxTopK; ++k) {
    if (k < p.top_k && rows[k] >= 0) {
      const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&v[k]);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += wts[k] * __bfloat162float(b[j]);
    }
  }
  if (p.addend) {
    if (p.addend_f32) {
      const float4* a = reinterpret_cast<const float4*>(static_cast<const float*>(p.addend) + t * p.dim) + 2 * c8;
      const float4 lo = a[0], hi = a[1];
      acc[0] += lo.x, acc[1] += lo.y, acc[2] += lo.z, acc[3] += lo.w;
      acc[4] += hi.x, acc[5] += hi.y, acc[6] += hi.z, acc[7] += hi.w;
    } else {
      const uint4 a = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.addend) + t * p.dim)[c8];
      const __nv_bfloat16* ab = reinterpret_cast<const __nv_bfloat16*>(&a);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += __bfloat162float(ab[j]);
    }
  }
  uint4 o;
  __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
  for (int j = 0; j < 8; ++j) ob[j] = __float2bfloat16(acc[j]);
  reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + t * p.dim)[c8] = o;
}

}  // namespace

cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  if (p.n_group < 1 || p.experts % p.n_group != 0 || p.n_group > 64 || p.top_k > p.experts) return cudaErrorInvalidValue;
  const size_t smem = kRouteWarps * route_smem_per_warp(p.experts, p.n_group, p.top_k);
  if (smem > 48 * 1024) return cudaErrorInvalidValue;
  const int64_t blocks = (p.tokens + kRouteWarps - 1) / kRouteWarps;
  return launch_pdl(moe_route_kernel, static_cast<unsigned>(blocks), 32 * kRouteWarps, smem, stream, p);
}

cudaError_t launch_moe_permute(const MoePermuteParams& p, cudaStream_t stream) {
  const size_t smem = 2 * sizeof(int32_t) * static_cast<size_t>(p.experts);
  if (p.experts < 1 || smem > 48 * 1024) return cudaErrorInvalidValue;
  return launch_pdl(moe_permute_kernel, 1, 1024, smem, stream, p);
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
