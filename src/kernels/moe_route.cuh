// Device bodies of MoE routing and permutation (kernels/moe.h semantics), shared by moe_route_kernel /
// moe_permute_kernel (moe.cu) and the fused router GEMM + routing + permutation (moe_gate_route.cu).
#pragma once
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/moe.h"

namespace ds::kernels::moe_detail {

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

// Routing takes one warp per token. Shared per warp: scores[E], choice[E], taken[E],
// keep[n_group], gscore[n_group], sel_id[top_k], sel_w[top_k] (laid out by route_smem_per_warp).
__host__ __device__ inline size_t route_smem_per_warp(int E, int n_group, int top_k) {
  // floats: scores, choice, gscore, sel_w; ints: sel_id; bytes: taken, keep (rounded up to 16).
  const size_t words = 2 * static_cast<size_t>(E) + n_group + 2 * static_cast<size_t>(top_k);
  const size_t bytes = words * 4 + E + n_group;
  return (bytes + 15) / 16 * 16;
}

// Routes token t with the calling warp (every lane); base: route_smem_per_warp bytes of this warp's shared memory.
// Syncs the warp, never the block.
__device__ inline void route_token(const MoeRouteParams& p, int64_t t, char* base) {
  const int E = p.experts, lane = threadIdx.x & 31;
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

// Bytes of permute_block's perm_smem for E experts.
__host__ __device__ inline size_t permute_smem_bytes(int E) { return 2 * sizeof(int32_t) * static_cast<size_t>(E); }

// The calling block (any multiple of 32 threads): counts with shared-memory atomics, a parallel scan for the
// offsets and the active list, then rows from shared cursors. perm_smem: counts[E], cursor[E]; warp_tot[32].
__device__ inline void permute_block(const MoePermuteParams& p, int32_t* perm_smem, uint64_t* warp_tot) {
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

}  // namespace ds::kernels::moe_detail
