// Device bodies of MoE routing and permutation (kernels/moe.h semantics), shared by moe_route_kernel /
// moe_permute_kernel (moe.cu) and the fused router GEMM + routing + permutation (moe_gate_route.cu).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "core/env.h"
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

// Group g's score over choice[g * per_group, (g + 1) * per_group): the max (group_limited_greedy) or the sum of the
// top two (noaux_tc). The top two of a multiset do not depend on the scan order; each group's scan starts at a
// different offset (shared-memory banks when lanes scan groups side by side).
__device__ __forceinline__ float group_score(const float* choice, int g, int per_group, RouteMethod method) {
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
  return method == RouteMethod::kNoauxTc ? v0 + (per_group > 1 ? v1 : 0.0f) : v0;
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
    for (int g = lane; g < ng; g += 32) {  // one lane per group
      gscore[g] = group_score(choice, g, per_group, p.method);
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
  const int W = route_width(p);
  int32_t* ids = p.topk_ids + t * W;
  float* wts = p.topk_weights + t * W;
  for (int k = lane; k < p.top_k; k += 32) {
    float w = sel_w[k];
    if (p.norm_topk_prob) w = static_cast<float>(w / (sum + 1e-20));
    ids[k] = sel_id[k];
    wts[k] = w * p.routed_scaling_factor;
  }
  for (int k = lane; k < p.shared; k += 32) {  // the shared experts, added unweighted
    ids[p.top_k + k] = E + k;
    wts[p.top_k + k] = 1.0f;
  }
}

// ---- Register routing for decode sizes (route_token's semantics, fewer dependent steps) ----
// Words of the register routing's bit mask over the experts a grouping sees (routed + shared, <= 256 + 32).
constexpr int kRouteMaskWords = 9;
// Limits of route_token_fast: experts <= 32 * J (J <= 8), top_k + shared <= 32, n_group <= 32, experts + shared
// within the mask.
__host__ __device__ constexpr bool route_fast_fits(int E, int top_k, int n_group, int J, int shared) {
  return E >= 1 && E <= 32 * J && top_k >= 1 && top_k + shared <= 32 && top_k <= E && n_group >= 1 &&
         n_group <= 32 && shared >= 0 && E + shared <= 32 * kRouteMaskWords;
}
// Expert rows J * 32 a lane holds: the smallest supported J for E experts (0: none).
__host__ __device__ constexpr int route_fast_j(int E) { return E <= 64 ? 2 : E <= 256 ? 8 : 0; }
// The J a routing launch takes for r (the register routing), or 0 (the shared-memory routing): where it does not
// fit, or under DSERVE_MOE_ROUTE_FAST=0 (read per launch, so tests take both).
inline int route_fast_launch_j(const MoeRouteParams& r) {
  const int J = route_fast_j(r.experts);
  return env_flag("DSERVE_MOE_ROUTE_FAST", true) && J > 0 && route_fast_fits(r.experts, r.top_k, r.n_group, J, r.shared)
             ? J
             : 0;
}

// A float's order as an unsigned key (larger float, larger key; -0 taken as +0 by the caller).
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The warp's winner among lanes with has = true: largest key, then lowest index (beats() on the floats behind the
// keys). Two redux instructions instead of a shuffle tree.
__device__ __forceinline__ uint32_t warp_pick(bool has, uint32_t key, uint32_t index) {
  const uint32_t m = __reduce_max_sync(0xffffffffu, has ? key : 0u);
  return __reduce_min_sync(0xffffffffu, has && key == m ? index : 0xffffffffu);
}

// The correction bias of the rows this lane holds (expert lane + 32 j): weights, so callers may load them before
// their PDL wait.
template <int J>
__device__ __forceinline__ void load_route_bias(const MoeRouteParams& p, float (&bias)[J]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < J; ++j) bias[j] = p.bias && lane + 32 * j < p.experts ? p.bias[lane + 32 * j] : 0.0f;
}

// Routes token t with the calling warp as route_token does (same arithmetic, same picks, same weights) with the
// scores in registers: lane k < top_k returns the k-th pick in *id and its final weight in *w, lanes top_k ..
// route_width - 1 the shared experts (weight 1), other lanes -1.
// Each pick is one pair of warp reductions. gsm: E floats of this warp's shared memory (group methods only).
template <int J>
__device__ __forceinline__ void route_token_fast(const MoeRouteParams& p, int64_t t, const float (&bias)[J],
                                                 float* gsm, int32_t* id, float* w) {
  const int E = p.experts, lane = threadIdx.x & 31;
  const float* z = p.logits + t * E;
  float zs[J], sc[J];
#pragma unroll
  for (int j = 0; j < J; ++j) zs[j] = lane + 32 * j < E ? z[lane + 32 * j] : 0.0f;
  if (p.sigmoid) {
#pragma unroll
    for (int j = 0; j < J; ++j) sc[j] = 1.0f / (1.0f + static_cast<float>(exp(static_cast<double>(-zs[j]))));
  } else {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (lane + 32 * j < E) mx = fmaxf(mx, zs[j]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    double ex[J], sum = 0;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      ex[j] = lane + 32 * j < E ? exp(static_cast<double>(zs[j] - mx)) : 0.0;
      sum += ex[j];
    }
    sum = warp_sum_d(sum);
#pragma unroll
    for (int j = 0; j < J; ++j) sc[j] = static_cast<float>(ex[j] / sum);
  }
  float ch[J];
  uint32_t avail = 0;  // bit j: row lane + 32 j exists and is not picked yet
#pragma unroll
  for (int j = 0; j < J; ++j) {
    ch[j] = sc[j] + bias[j];
    if (lane + 32 * j < E) avail |= 1u << j;
  }
  if (p.method != RouteMethod::kGreedy) {
    const int per_group = E / p.n_group, ng = p.n_group;
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (lane + 32 * j < E) gsm[lane + 32 * j] = ch[j];
    __syncwarp();
    const float gs = lane < ng ? group_score(gsm, lane, per_group, p.method) : -INFINITY;
    __syncwarp();  // gsm is free again
    uint32_t keep = 0;
    const uint32_t gkey = order_key(gs + 0.0f);
    for (int k = 0; k < p.topk_group && k < ng; ++k)
      keep |= 1u << warp_pick(lane < ng && !((keep >> lane) & 1u), gkey, lane);
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (!((keep >> ((lane + 32 * j) / per_group)) & 1u)) ch[j] = -INFINITY;
  }
  uint32_t key[J];
#pragma unroll
  for (int j = 0; j < J; ++j) key[j] = order_key(ch[j] + 0.0f);
  double sum = 0;
  int32_t my_id = -1;
  float my_w = 0.0f;
  for (int k = 0; k < p.top_k; ++k) {
    // This lane's best row left (its rows ascend with j: the first of equal keys is the lower index).
    int bj = -1;
    uint32_t bkey = 0;
    float bsc = 0.0f;
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (((avail >> j) & 1u) && (bj < 0 || key[j] > bkey)) {
        bj = j;
        bkey = key[j];
        bsc = sc[j];
      }
    const uint32_t i = warp_pick(bj >= 0, bkey, static_cast<uint32_t>(lane + 32 * bj));
    if (static_cast<int>(i & 31u) == lane) avail &= ~(1u << (i >> 5));
    const float s = __shfl_sync(0xffffffffu, bsc, static_cast<int>(i & 31u));  // weights use the unbiased scores
    sum += s;
    if (lane == k) {
      my_id = static_cast<int32_t>(i);
      my_w = s;
    }
  }
  if (lane < p.top_k) {
    if (p.norm_topk_prob) my_w = static_cast<float>(my_w / (sum + 1e-20));
    my_w *= p.routed_scaling_factor;
  } else if (lane < route_width(p)) {
    my_id = E + lane - p.top_k;
    my_w = 1.0f;
  }
  *id = my_id;
  *w = my_w;
}

// The grouping of n entries (ids[i] in [0, E), shared memory) by expert, stored into g by the whole block:
// counts, offsets, the active list and its length, row_of (rows of an expert in entry order) and src_token.
// mask: the experts with rows as bits (word e / 32), complete in shared memory. Counting over the entries, no
// atomics: for decode sizes (n up to a few hundred).
__device__ inline void store_grouping(const int32_t* ids, int n, const uint32_t* mask, const MoePermuteParams& g) {
  // Expert e's index in the active list: the experts with rows below it.
  auto active_pos = [&](int e) {
    int pos = __popc(mask[e >> 5] & ((1u << (e & 31)) - 1u));
    for (int wd = 0; wd < (e >> 5); ++wd) pos += __popc(mask[wd]);
    return pos;
  };
  for (int e = threadIdx.x; e < g.experts; e += blockDim.x) {
    int c = 0, below = 0;
    for (int i = 0; i < n; ++i) {
      c += ids[i] == e;
      below += ids[i] < e;
    }
    g.counts[e] = c;
    g.offsets[e] = below;
    if (c > 0 && (g.active || g.slots)) {
      const int pos = active_pos(e);
      if (g.active) g.active[pos] = e;
      if (g.slots) *reinterpret_cast<int4*>(g.slots + pos * kMoeSlotInts) = make_int4(e, c, below, 0);
    }
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int e = ids[i];
    int below = 0, rank = 0;
    for (int j = 0; j < n; ++j) {
      below += ids[j] < e;
      rank += j < i && ids[j] == e;
    }
    const int row = below + rank;
    g.row_of[i] = row;
    g.src_token[row] = i / g.top_k;
    if (g.slots && rank < kMoeSlotSrc) g.slots[active_pos(e) * kMoeSlotInts + kMoeSlotHeader + rank] = i / g.top_k;
  }
  int total = 0;
  for (int wd = 0; wd < (g.experts + 31) / 32; ++wd) total += __popc(mask[wd]);
  if (g.num_active && threadIdx.x == 0) *g.num_active = total;
  if (g.slots) {
    const int slots = static_cast<int>(moe_slot_count(g.experts, g.entries));
    for (int s = total + threadIdx.x; s < slots; s += blockDim.x) g.slots[s * kMoeSlotInts + 1] = 0;  // no rows
  }
}

// Slot records need the active list (and its length) and 16-byte alignment.
inline bool slots_ok(const MoePermuteParams& g) {
  return !g.slots || (g.active && g.num_active && (reinterpret_cast<uintptr_t>(g.slots) & 15) == 0);
}

// The slot records (MoePermuteParams::slots) of a grouping this block has stored in global memory (counts,
// offsets, active, num_active, src_token; published to the block by a barrier before the call): permute_block's
// last step.
__device__ inline void store_slots_from_global(const MoePermuteParams& g) {
  const int slots = static_cast<int>(moe_slot_count(g.experts, g.entries));
  const int active = *g.num_active;
  for (int s = threadIdx.x; s < slots; s += blockDim.x) {
    int32_t* rec = g.slots + s * kMoeSlotInts;
    if (s >= active) {
      rec[1] = 0;
      continue;
    }
    const int e = g.active[s], c = g.counts[e], off = g.offsets[e];
    *reinterpret_cast<int4*>(rec) = make_int4(e, c, off, 0);
    for (int r = 0; r < c && r < kMoeSlotSrc; ++r) rec[kMoeSlotHeader + r] = g.src_token[off + r];
  }
}

// The calling block routes every token (warp w: tokens w, w + warps, ...) into r's ids and weights and into ids_s
// (route_token_fast), then groups those ids (store_grouping). mask_s: ceil(g.experts / 32) words, zeroed before
// the call; gsm: warps * 32 * J floats (group methods). bias: load_route_bias's.
template <int J>
__device__ __forceinline__ void route_and_group_fast(const MoeRouteParams& r, const MoePermuteParams& g,
                                                     const float (&bias)[J], int warps, int32_t* ids_s,
                                                     uint32_t* mask_s, float* gsm) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int64_t t = warp; t < r.tokens; t += warps) {
    int32_t id;
    float w;
    route_token_fast<J>(r, t, bias, gsm + warp * 32 * J, &id, &w);
    const int W = route_width(r);
    if (lane < W) {
      ids_s[t * W + lane] = id;
      r.topk_ids[t * W + lane] = id;
      r.topk_weights[t * W + lane] = w;
    }
  }
  __syncthreads();
  const int n = static_cast<int>(r.tokens) * route_width(r);
  for (int i = threadIdx.x; i < n; i += blockDim.x) atomicOr(&mask_s[ids_s[i] >> 5], 1u << (ids_s[i] & 31));
  __syncthreads();
  store_grouping(ids_s, n, mask_s, g);
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
// offsets and the active list, then rows from shared cursors, then the slot records where p asks for them.
// perm_smem: counts[E], cursor[E]; warp_tot[32].
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
  if (p.slots) {
    __syncthreads();  // the grouping is in global memory, written by this block
    store_slots_from_global(p);
  }
}

}  // namespace ds::kernels::moe_detail
