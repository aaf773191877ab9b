// MoE routing and permutation kernels (see moe.h). Routing follows CpuOps::moe_route step by step,
// including the double-precision softmax sum and the order of the selected experts.
#include <cuda_bf16.h>

#include "kernels/moe.h"

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

// One warp (the whole block) per token. Shared: scores[E], choice[E], taken[E], keep[n_group].
__global__ void moe_route_kernel(MoeRouteParams p) {
  extern __shared__ float smem[];
  const int E = p.experts, lane = threadIdx.x;
  float* scores = smem;
  float* choice = smem + E;
  char* taken = reinterpret_cast<char*>(smem + 2 * E);
  char* keep = taken + E;
  const int64_t t = blockIdx.x;
  const float* z = p.logits + t * E;
  if (p.sigmoid) {
    // exp in double rounded to float: the correctly rounded expf the CPU reference gets from libm.
    for (int e = lane; e < E; e += 32) scores[e] = 1.0f / (1.0f + static_cast<float>(exp(static_cast<double>(-z[e]))));
  } else {
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32) mx = fmaxf(mx, z[e]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    double sum = 0;
    for (int e = lane; e < E; e += 32) sum += exp(static_cast<double>(z[e] - mx));
    sum = warp_sum_d(sum);
    for (int e = lane; e < E; e += 32) scores[e] = static_cast<float>(exp(static_cast<double>(z[e] - mx)) / sum);
  }
  for (int e = lane; e < E; e += 32) {
    choice[e] = scores[e] + (p.bias ? p.bias[e] : 0.0f);
    taken[e] = 0;
  }
  __syncwarp();
  if (p.method != RouteMethod::kGreedy) {
    const int per_group = E / p.n_group;
    if (lane == 0) {
      // Group score: max (group_limited_greedy) or sum of the top two (noaux_tc); keep the best topk_group
      // groups. Serial: n_group is small (<= 32 in every DeepSeek config).
      float gscore[64];
      const int ng = p.n_group < 64 ? p.n_group : 64;
      for (int g = 0; g < ng; ++g) {
        float v0 = -INFINITY, v1 = -INFINITY;
        for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
          const float c = choice[e];
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
      for (int k = 0; k < p.topk_group && k < ng; ++k) {
        int best = -1;
        for (int g = 0; g < ng; ++g)
          if (!keep[g] && (best < 0 || beats(gscore[g], g, gscore[best], best))) best = g;
        keep[best] = 1;
      }
    }
    __syncwarp();
    for (int e = lane; e < E; e += 32)
      if (!keep[e / per_group]) choice[e] = -INFINITY;
    __syncwarp();
  }
  int32_t* ids = p.topk_ids + t * p.top_k;
  float* wts = p.topk_weights + t * p.top_k;
  double sum = 0;
  for (int k = 0; k < p.top_k; ++k) {
    float v = -INFINITY;
    int i = -1;
    for (int e = lane; e < E; e += 32)
      if (!taken[e] && (i < 0 || beats(choice[e], e, v, i))) {
        v = choice[e];
        i = e;
      }
    warp_argmax(v, i);
    if (lane == 0) {
      taken[i] = 1;
      ids[k] = i;
      wts[k] = scores[i];  // weights use the unbiased scores
    }
    sum += scores[i];
    __syncwarp();
  }
  if (lane == 0)
    for (int k = 0; k < p.top_k; ++k) {
      float w = wts[k];
      if (p.norm_topk_prob) w = static_cast<float>(w / (sum + 1e-20));
      wts[k] = w * p.routed_scaling_factor;
    }
}

__global__ void moe_permute_kernel(MoePermuteParams p) {
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) {
    p.counts[e] = 0;
    p.cursor[e] = 0;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < p.entries; i += blockDim.x) {
    const int e = p.topk_ids[i];
    if (e >= 0 && e < p.experts) atomicAdd(&p.counts[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t acc = 0, n_active = 0;
    for (int e = 0; e < p.experts; ++e) {
      p.offsets[e] = acc;
      acc += p.counts[e];
      if (p.active && p.counts[e] > 0) p.active[n_active++] = e;
    }
    if (p.num_active) *p.num_active = n_active;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < p.entries; i += blockDim.x) {
    const int e = p.topk_ids[i];
    if (e >= 0 && e < p.experts) {
      const int32_t row = p.offsets[e] + atomicAdd(&p.cursor[e], 1);
      p.row_of[i] = row;
      p.src_token[row] = static_cast<int32_t>(i / p.top_k);
    } else {
      p.row_of[i] = -1;
    }
  }
}

__global__ void gather_rows_kernel(const __nv_bfloat16* x, const int32_t* src, __nv_bfloat16* out, int64_t dim) {
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

__global__ void moe_combine_kernel(MoeCombineParams p) {
  const int64_t t = blockIdx.x;
  const __nv_bfloat16* y = static_cast<const __nv_bfloat16*>(p.y);
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + t * p.dim;
  for (int64_t c = threadIdx.x; c < p.dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < p.top_k; ++k) {
      const int32_t row = p.row_of[t * p.top_k + k];
      if (row >= 0) acc += p.weights[t * p.top_k + k] * __bfloat162float(y[static_cast<int64_t>(row) * p.dim + c]);
    }
    out[c] = __float2bfloat16(acc);
  }
}

}  // namespace

cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  if (p.n_group < 1 || p.experts % p.n_group != 0 || p.n_group > 64 || p.top_k > p.experts) return cudaErrorInvalidValue;
  const size_t smem = 2 * sizeof(float) * p.experts + p.experts + p.n_group;
  moe_route_kernel<<<static_cast<unsigned>(p.tokens), 32, smem, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_moe_permute(const MoePermuteParams& p, cudaStream_t stream) {
  moe_permute_kernel<<<1, 1024, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(const void* x, const int32_t* src, void* out, int64_t rows, int64_t dim,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  gather_rows_kernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), src,
                                                                      static_cast<__nv_bfloat16*>(out), dim);
  return cudaGetLastError();
}

cudaError_t launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  moe_combine_kernel<<<static_cast<unsigned>(p.tokens), 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ds::kernels
