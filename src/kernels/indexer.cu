// Lightning-indexer scores and top-k selection (see indexer.h).
#include <algorithm>

#include <cuda_bf16.h>

#include "kernels/block_reduce.cuh"
#include "kernels/indexer.h"
#include "kernels/pdl.cuh"
#include "kernels/per_device.h"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kPositionsPerBlock = 64;
constexpr int kSelectThreads = 1024;
constexpr int kMmaThreads = 128;  // four warps, 16 positions of a 64-position tile each
constexpr int kMmaTile = 64;
constexpr int kMmaBlocksPerSm = 6;  // resident at 35 KB of shared memory each: enough tiles in flight to stream keys
constexpr int kMtTokens = 4;             // multi-token scores: consecutive query rows of one sequence a block
constexpr int kMtWarps = 8;              // four 16-position row groups x two pairs of tokens
constexpr int kMtThreads = kMtWarps * 32;
constexpr int kSelectBuckets = 4096;     // 12-bit digits
constexpr int kSelectCandidates = 4096;  // keys of the first digit's bucket listed in shared memory (16 KB)
constexpr int kSelectStage = 40960;      // keys staged in shared memory (160 KB); a longer context reads the rest again

__device__ __forceinline__ int seq_of(const int32_t* q_starts, int num_seqs, int64_t t) {
  int lo = 0, hi = num_seqs - 1;  // largest s with q_starts[s] <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (q_starts[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ float head_weight(const IndexerParams& p, int64_t t, int64_t h) {
  return (p.w_f32 ? static_cast<const float*>(p.w)[t * p.heads + h]
                  : __bfloat162float(static_cast<const __nv_bfloat16*>(p.w)[t * p.heads + h])) *
         p.w_scale;
}

// CUDA cores: a warp per position, every head's dot product reduced across the warp. Any heads / dim.
__global__ void indexer_scores_kernel(IndexerParams p) {
  extern __shared__ float sq[];  // [heads * dim] q as fp32, then [heads] scaled weights
  float* sw = sq + p.heads * p.dim;
  const int64_t r = blockIdx.x, t = p.token_begin + r;
  const int n = p.positions[t] + 1;
  const int first = blockIdx.y * kPositionsPerBlock;
  if (first >= n) return;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) + t * p.heads * p.dim;
  for (int64_t i = threadIdx.x; i < p.heads * p.dim; i += blockDim.x) sq[i] = __bfloat162float(q[i]);
  for (int64_t h = threadIdx.x; h < p.heads; h += blockDim.x) sw[h] = head_weight(p, t, h);
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
    if (lane == 0) p.scores[r * p.score_cols + j] = acc;
  }
}

// Tensor cores: a block walks tiles of 64 positions (blockIdx.y, + gridDim.y, ...) of one token. Each warp computes
// S^T = K Q^T for 16 positions x HP heads (bf16 m16n8k16, fp32 accumulators: positions are the M rows, so a head's
// weight and ReLU apply per column and the head sum is a quad reduction). Heads past p.heads are zero rows.
template <int HP, int D>
__global__ void __launch_bounds__(kMmaThreads) indexer_scores_mma_kernel(IndexerParams p) {
  constexpr int LD = D + 8;  // row stride (bf16): rows 16 bytes apart mod 128, so ldmatrix's 8 rows hit distinct banks
  constexpr int kChunks = D / 8;  // 16-byte pieces of a row
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem);  // [HP][LD]
  __nv_bfloat16* ks = qs + HP * LD;                             // [kMmaTile][LD]
  float* ws = reinterpret_cast<float*>(ks + kMmaTile * LD);     // [HP] scaled head weights (0 past p.heads)
  const int64_t r = blockIdx.x, t = p.token_begin + r;
  const int n = p.positions[t] + 1;
  if (static_cast<int>(blockIdx.y) * kMmaTile >= n) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) + t * p.heads * D;
  for (int c = tid; c < HP * kChunks; c += kMmaThreads) {
    const int h = c / kChunks, part = c % kChunks;
    ptx::cp_async16(qs + h * LD + part * 8, h < p.heads ? q + h * D + part * 8 : q, h < p.heads);
  }
  for (int h = tid; h < HP; h += kMmaThreads) ws[h] = h < p.heads ? head_weight(p, t, h) : 0.0f;
  const int32_t* table = p.block_table + static_cast<int64_t>(seq_of(p.q_starts, p.num_seqs, t)) * p.max_pages;
  const __nv_bfloat16* kc = static_cast<const __nv_bfloat16*>(p.k_cache);
  float* out = p.scores + r * p.score_cols;
  for (int tile = blockIdx.y; tile * kMmaTile < n; tile += gridDim.y) {
    for (int c = tid; c < kMmaTile * kChunks; c += kMmaThreads) {
      const int row = c / kChunks, part = c % kChunks, j = tile * kMmaTile + row;
      const bool valid = j < n;  // positions past the token's own are zero-filled, their pages never read
      const __nv_bfloat16* src =
          valid ? kc + (static_cast<int64_t>(table[j / p.page_size]) * p.page_size + j % p.page_size) * D + part * 8
                : kc;
      ptx::cp_async16(ks + row * LD + part * 8, src, valid);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
    __syncthreads();
    float acc[HP / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      ptx::ldmatrix_x4(a, ks + (warp * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int np = 0; np < HP / 16; ++np) {
        uint32_t b[4];
        ptx::ldmatrix_x4(b, qs + (np * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 + ((lane / 8) % 2) * 8);
        ptx::mma_bf16(acc[2 * np], a, b[0], b[1]);
        ptx::mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
      }
    }
    float s0 = 0.0f, s1 = 0.0f;  // positions lane / 4 and lane / 4 + 8 of the warp's 16, this lane's heads
#pragma unroll
    for (int j = 0; j < HP / 8; ++j) {
      const int h = j * 8 + 2 * (lane % 4);
      s0 += ws[h] * fmaxf(0.0f, acc[j][0] * p.q_scale) + ws[h + 1] * fmaxf(0.0f, acc[j][1] * p.q_scale);
      s1 += ws[h] * fmaxf(0.0f, acc[j][2] * p.q_scale) + ws[h + 1] * fmaxf(0.0f, acc[j][3] * p.q_scale);
    }
    s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
    s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
    if (lane % 4 == 0) {
      const int j0 = tile * kMmaTile + warp * 16 + lane / 4;
      if (j0 < n) out[j0] = s0;
      if (j0 + 8 < n) out[j0 + 8] = s1;
    }
    __syncthreads();  // the next tile's loads overwrite ks
  }
}

// Prefill: the same tensor-core scores for kMtTokens consecutive query rows of one sequence (grid: row groups x
// sequences), which share each key tile, so a tile is read once for four tokens instead of once a token; the tiles
// double-buffered (cp.async). Warp w takes positions (w % 4) * 16 of the tile for tokens 2 (w / 4) and 2 (w / 4) + 1.
// Rows outside this launch's chunk [token_begin, token_begin + token_count) are skipped (another launch covers them).
template <int HP, int D>
__global__ void __launch_bounds__(kMtThreads) indexer_scores_mt_kernel(IndexerParams p) {
  constexpr int LD = D + 8;
  constexpr int kChunks = D / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem);  // [kMtTokens][HP][LD]
  __nv_bfloat16* ks = qs + kMtTokens * HP * LD;                 // [2][kMmaTile][LD]
  float* ws = reinterpret_cast<float*>(ks + 2 * kMmaTile * LD); // [kMtTokens][HP] scaled head weights
  __shared__ int s_n[kMtTokens];                               // context length a row (0: not this launch's)
  const int seq = blockIdx.y;
  const int q0 = p.q_starts[seq], qn = p.q_starts[seq + 1] - q0;
  const int g0 = static_cast<int>(blockIdx.x) * kMtTokens;
  if (g0 >= qn) return;
  const int64_t tbase = int64_t{q0} + g0;  // token of row slot 0
  const int64_t t_lo = max(tbase, p.token_begin);
  const int64_t t_hi = min(int64_t{q0} + min(g0 + kMtTokens, qn), p.token_begin + p.token_count);
  if (t_lo >= t_hi) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const auto mine = [&](int slot) { return tbase + slot >= t_lo && tbase + slot < t_hi; };
  if (tid < kMtTokens) s_n[tid] = mine(tid) ? p.positions[tbase + tid] + 1 : 0;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q);
  for (int c = tid; c < kMtTokens * HP * kChunks; c += kMtThreads) {
    const int slot = c / (HP * kChunks), h = (c / kChunks) % HP, part = c % kChunks;
    const bool valid = mine(slot) && h < p.heads;
    ptx::cp_async16(qs + (slot * HP + h) * LD + part * 8, valid ? q + ((tbase + slot) * p.heads + h) * D + part * 8 : q,
                    valid);
  }
  for (int i = tid; i < kMtTokens * HP; i += kMtThreads) {
    const int slot = i / HP, h = i % HP;
    ws[i] = mine(slot) && h < p.heads ? head_weight(p, tbase + slot, h) : 0.0f;
  }
  ptx::cp_async_commit();
  __syncthreads();  // s_n
  int n_max = 0;
#pragma unroll
  for (int i = 0; i < kMtTokens; ++i) n_max = max(n_max, s_n[i]);
  const int32_t* table = p.block_table + static_cast<int64_t>(seq) * p.max_pages;
  const __nv_bfloat16* kc = static_cast<const __nv_bfloat16*>(p.k_cache);
  const auto load_tile = [&](int tile) {
    __nv_bfloat16* dst = ks + (tile % 2) * kMmaTile * LD;
    for (int c = tid; c < kMmaTile * kChunks; c += kMtThreads) {
      const int row = c / kChunks, part = c % kChunks, j = tile * kMmaTile + row;
      const bool valid = j < n_max;
      const __nv_bfloat16* src =
          valid ? kc + (static_cast<int64_t>(table[j / p.page_size]) * p.page_size + j % p.page_size) * D + part * 8
                : kc;
      ptx::cp_async16(dst + row * LD + part * 8, src, valid);
    }
    ptx::cp_async_commit();
  };
  const int tiles = (n_max + kMmaTile - 1) / kMmaTile;
  const int pg = warp % 4, pair = warp / 4;
  int n_slot[2];
#pragma unroll
  for (int s = 0; s < 2; ++s) n_slot[s] = s_n[2 * pair + s];
  load_tile(0);
  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + 1 < tiles) {
      load_tile(tile + 1);
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();
    const __nv_bfloat16* kt = ks + (tile % 2) * kMmaTile * LD;
    const int first = tile * kMmaTile + pg * 16;  // this warp's first position
    bool live[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) live[s] = first < n_slot[s];
    if (live[0] || live[1]) {  // warp-uniform
      float acc[2][HP / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[4];
        ptx::ldmatrix_x4(a, kt + (pg * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          if (!live[s]) continue;
          const __nv_bfloat16* qb = qs + (2 * pair + s) * HP * LD;
#pragma unroll
          for (int np = 0; np < HP / 16; ++np) {
            uint32_t b[4];
            ptx::ldmatrix_x4(b, qb + (np * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 + ((lane / 8) % 2) * 8);
            ptx::mma_bf16(acc[s][2 * np], a, b[0], b[1]);
            ptx::mma_bf16(acc[s][2 * np + 1], a, b[2], b[3]);
          }
        }
      }
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        if (!live[s]) continue;
        const float* w = ws + (2 * pair + s) * HP;
        float s0 = 0.0f, s1 = 0.0f;  // positions first + lane / 4 and + 8, this lane's heads
#pragma unroll
        for (int j = 0; j < HP / 8; ++j) {
          const int h = j * 8 + 2 * (lane % 4);
          s0 += w[h] * fmaxf(0.0f, acc[s][j][0] * p.q_scale) + w[h + 1] * fmaxf(0.0f, acc[s][j][1] * p.q_scale);
          s1 += w[h] * fmaxf(0.0f, acc[s][j][2] * p.q_scale) + w[h + 1] * fmaxf(0.0f, acc[s][j][3] * p.q_scale);
        }
        s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
        s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
        s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
        s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
        if (lane % 4 == 0) {
          float* out = p.scores + (tbase + 2 * pair + s - p.token_begin) * p.score_cols;
          const int j0 = first + lane / 4;
          if (j0 < n_slot[s]) out[j0] = s0;
          if (j0 + 8 < n_slot[s]) out[j0 + 8] = s1;
        }
      }
    }
    __syncthreads();  // the next iteration's load overwrites this buffer
  }
}

// Order-preserving map of a float to uint32 (larger float -> larger key).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Block-wide, over a complete histogram of nb buckets (256 or 4096): the bucket where the count from the top reaches
// `remaining`, into *bucket, and how many of its keys are still to take, into *left. Ends synchronised.
__device__ __forceinline__ void find_bucket(const int* hist, int nb, int remaining, int* warp_sums, int* bucket,
                                           int* left) {
  const int per = nb >= kSelectThreads ? nb / kSelectThreads : 1;  // buckets a thread holds, highest first
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int top = nb - 1 - tid * per;
  int sum = 0;
  if (top >= 0)
    for (int i = 0; i < per; ++i) sum += hist[top - i];
  int incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  incl += __reduce_add_sync(0xffffffffu, lane < warp ? warp_sums[lane] : 0);
  int acc = incl - sum;
  if (top >= 0 && acc < remaining && remaining <= incl)
    for (int i = 0; i < per; ++i) {
      const int c = hist[top - i];
      if (acc + c >= remaining) {
        *bucket = top - i;
        *left = remaining - acc;
        break;
      }
      acc += c;
    }
  __syncthreads();
}

// Block-wide exclusive scan in thread order of v (and the block's total in *total): warp scans, then the warps'
// totals through warp_sums. Ends synchronised (warp_sums free again).
__device__ __forceinline__ int block_exclusive_scan(int v, int* warp_sums, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += u;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  const int w = warp_sums[lane];
  const int before = __reduce_add_sync(0xffffffffu, lane < warp ? w : 0);
  *total = __reduce_add_sync(0xffffffffu, w);
  __syncthreads();
  return before + incl - v;
}

// One block per token: a radix select over the order keys (digits of 12, 12 and 8 bits) finds the keep-th largest,
// then one pass writes the chosen positions in ascending order (every key above it, and the lowest positions of those
// equal to it). Each thread takes four consecutive keys at a time. The first min(n, staged_cap) keys are staged in
// shared memory (a longer context reads the rest from the scratch again); after the first digit only the keys of its
// bucket are walked, listed in shared memory when they fit. Histograms take one shared atomic a key: aggregating a
// warp's equal buckets with __match_any_sync first cost more than the conflicts it saved (1 x 32K: 50 vs 28 us).
__global__ void __launch_bounds__(kSelectThreads, 1) indexer_select_kernel(IndexerParams p, int staged_cap) {
  constexpr int kGroup = 4;  // consecutive keys a thread takes per round
  extern __shared__ __align__(16) unsigned char select_smem[];
  int* hist = reinterpret_cast<int*>(select_smem);                     // [kSelectBuckets]
  uint32_t* cand = reinterpret_cast<uint32_t*>(hist + kSelectBuckets);  // [kSelectCandidates]
  uint32_t* stage = cand + kSelectCandidates;                           // [staged_cap]
  __shared__ int warp_sums[kSelectThreads / 32];
  __shared__ int s_bucket, s_left, s_cands;
  const int64_t r = blockIdx.x, t = p.token_begin + r;
  const int n = p.positions[t] + 1;
  const int keep = min(p.topk, n);
  const int tid = threadIdx.x;
  int32_t* out = p.out + t * p.topk;
  for (int k = keep + tid; k < p.topk; k += kSelectThreads) out[k] = -1;
  if (n <= p.topk) {  // the whole context
    for (int k = tid; k < n; k += kSelectThreads) out[k] = k;
    return;
  }
  const float* sc = p.scores + r * p.score_cols;
  const int staged = min(n, staged_cap);
  {  // 16-byte loads, eight in flight a thread
    const int n4 = p.score_cols % 4 == 0 ? staged / 4 : 0;  // rows start 16-byte aligned when score_cols is
    const float4* sc4 = reinterpret_cast<const float4*>(sc);
    for (int base = 0; base < n4; base += 8 * kSelectThreads) {
      float4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = base + u * kSelectThreads + tid;
        if (i < n4) v[u] = sc4[i];
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = base + u * kSelectThreads + tid;
        if (i < n4)
          reinterpret_cast<uint4*>(stage)[i] =
              make_uint4(order_key(v[u].x), order_key(v[u].y), order_key(v[u].z), order_key(v[u].w));
      }
    }
    for (int j = n4 * 4 + tid; j < staged; j += kSelectThreads) stage[j] = order_key(sc[j]);
  }
  for (int i = tid; i < kSelectBuckets; i += kSelectThreads) hist[i] = 0;
  if (tid == 0) s_cands = 0;
  __syncthreads();
  // Keys g * 4 .. g * 4 + 3 (0 past the context: callers test the position against n).
  const auto keys4 = [&](int g, uint32_t (&k)[kGroup]) {
    const int j = g * kGroup;
    if (j + kGroup <= staged) {
      const uint4 v = reinterpret_cast<const uint4*>(stage)[g];
      k[0] = v.x, k[1] = v.y, k[2] = v.z, k[3] = v.w;
    } else {
#pragma unroll
      for (int e = 0; e < kGroup; ++e)
        k[e] = j + e < staged ? stage[j + e] : j + e < n ? order_key(sc[j + e]) : 0u;
    }
  };
  const int rounds = (n + kGroup * kSelectThreads - 1) / (kGroup * kSelectThreads);
  // Digit 1: bits 31..20 of every key.
  for (int c = 0; c < rounds; ++c) {
    const int g = c * kSelectThreads + tid;
    uint32_t k[kGroup];
    keys4(g, k);
#pragma unroll
    for (int e = 0; e < kGroup; ++e)
      if (g * kGroup + e < n) atomicAdd(&hist[k[e] >> 20], 1);
  }
  __syncthreads();
  find_bucket(hist, kSelectBuckets, keep, warp_sums, &s_bucket, &s_left);
  uint32_t prefix = static_cast<uint32_t>(s_bucket) << 20, mask = 0xFFF00000u;
  int remaining = s_left;
  const bool listed = hist[s_bucket] <= kSelectCandidates;
  __syncthreads();  // hist is cleared below
  if (listed) {
    for (int c = 0; c < rounds; ++c) {
      const int g = c * kSelectThreads + tid;
      uint32_t k[kGroup];
      keys4(g, k);
      bool in[kGroup];
      int count = 0;
#pragma unroll
      for (int e = 0; e < kGroup; ++e) count += in[e] = g * kGroup + e < n && (k[e] & mask) == prefix;
      int total = 0;
      int at = block_exclusive_scan(count, warp_sums, &total) + s_cands;
#pragma unroll
      for (int e = 0; e < kGroup; ++e)
        if (in[e]) cand[at++] = k[e];
      __syncthreads();  // every thread has read s_cands
      if (tid == 0) s_cands += total;
    }
  }
  __syncthreads();
  // Digits 2 (bits 19..8) and 3 (bits 7..0) over the first digit's bucket.
  for (int digit = 2; digit <= 3; ++digit) {
    const int shift = digit == 2 ? 8 : 0, nb = digit == 2 ? kSelectBuckets : 256;
    for (int i = tid; i < nb; i += kSelectThreads) hist[i] = 0;
    __syncthreads();
    if (listed) {
      for (int i = tid; i < s_cands; i += kSelectThreads)
        if ((cand[i] & mask) == prefix) atomicAdd(&hist[(cand[i] >> shift) & (nb - 1)], 1);
    } else {
      for (int c = 0; c < rounds; ++c) {
        const int g = c * kSelectThreads + tid;
        uint32_t k[kGroup];
        keys4(g, k);
#pragma unroll
        for (int e = 0; e < kGroup; ++e)
          if (g * kGroup + e < n && (k[e] & mask) == prefix) atomicAdd(&hist[(k[e] >> shift) & (nb - 1)], 1);
      }
    }
    __syncthreads();
    find_bucket(hist, nb, remaining, warp_sums, &s_bucket, &s_left);
    prefix |= static_cast<uint32_t>(s_bucket) << shift;
    mask |= static_cast<uint32_t>(nb - 1) << shift;
    remaining = s_left;
    __syncthreads();  // hist is cleared next
  }
  // prefix is the keep-th largest key: keep - remaining keys above it, `remaining` of those equal to it. Each thread
  // counts its four (above, equal) packed in one int (at most 4096 a round each), scanned across the block.
  int gt_total = 0, tie_total = 0;  // over the rounds before this one (uniform across the block)
  for (int c = 0; c < rounds && gt_total + min(tie_total, remaining) < keep; ++c) {
    const int g = c * kSelectThreads + tid;
    uint32_t k[kGroup];
    keys4(g, k);
    int packed = 0;
#pragma unroll
    for (int e = 0; e < kGroup; ++e)
      if (g * kGroup + e < n) packed += k[e] > prefix ? 1 : k[e] == prefix ? (1 << 16) : 0;
    int total = 0;
    const int before = block_exclusive_scan(packed, warp_sums, &total);
    int gt_before = gt_total + (before & 0xFFFF), tie_before = tie_total + (before >> 16);
#pragma unroll
    for (int e = 0; e < kGroup; ++e) {
      const int j = g * kGroup + e;
      if (j >= n) break;
      if (k[e] > prefix) {
        out[gt_before + min(tie_before, remaining)] = j;
        ++gt_before;
      } else if (k[e] == prefix) {
        if (tie_before < remaining) out[gt_before + tie_before] = j;
        ++tie_before;
      }
    }
    gt_total += total & 0xFFFF;
    tie_total += total >> 16;
  }
}

template <int HP, int D>
cudaError_t launch_mma(const IndexerParams& p, dim3 grid, cudaStream_t stream) {
  constexpr size_t smem = sizeof(__nv_bfloat16) * (HP + kMmaTile) * (D + 8) + sizeof(float) * HP;
  static_assert(smem <= 48 * 1024, "indexer mma tile over the default shared-memory limit");
  return launch_plain(indexer_scores_mma_kernel<HP, D>, grid, kMmaThreads, smem, stream, p);
}

template <int HP, int D>
cudaError_t launch_mt(const IndexerParams& p, cudaStream_t stream) {
  constexpr size_t smem =
      sizeof(__nv_bfloat16) * (kMtTokens * HP + 2 * kMmaTile) * (D + 8) + sizeof(float) * kMtTokens * HP;
  static_assert(smem <= 227 * 1024, "indexer multi-token tiles over the shared-memory limit");
  if constexpr (smem > 48 * 1024) {
    static PerDevice<cudaError_t> attr;
    if (const cudaError_t e = attr.get([] {
          return cudaFuncSetAttribute(indexer_scores_mt_kernel<HP, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem));
        });
        e != cudaSuccess)
      return e;
  }
  const dim3 grid(static_cast<unsigned>((p.max_q_len + kMtTokens - 1) / kMtTokens), static_cast<unsigned>(p.num_seqs));
  return launch_plain(indexer_scores_mt_kernel<HP, D>, grid, kMtThreads, smem, stream, p);
}

template <int HP>
cudaError_t launch_mma_dim(const IndexerParams& p, dim3 grid, bool multi_token, cudaStream_t stream) {
  switch (p.dim) {
    case 32: return multi_token ? launch_mt<HP, 32>(p, stream) : launch_mma<HP, 32>(p, grid, stream);
    case 64: return multi_token ? launch_mt<HP, 64>(p, stream) : launch_mma<HP, 64>(p, grid, stream);
    case 128: return multi_token ? launch_mt<HP, 128>(p, stream) : launch_mma<HP, 128>(p, grid, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool indexer_mma_supported(int64_t heads, int64_t dim) {
  return heads >= 1 && heads <= 64 && (dim == 32 || dim == 64 || dim == 128);
}

cudaError_t launch_indexer_scores(const IndexerParams& p, bool mma, cudaStream_t stream) {
  if (p.token_count == 0) return cudaSuccess;
  if (p.score_cols < 1) return cudaErrorInvalidValue;
  if (mma && indexer_mma_supported(p.heads, p.dim)) {
    // Tiles spread over ~kMmaBlocksPerSm blocks an SM; a block past its token's context returns at once.
    const int64_t tiles = (p.score_cols + kMmaTile - 1) / kMmaTile;
    int64_t per_token = tiles;
    if (p.num_sms > 0)
      per_token = std::min<int64_t>(
          tiles, std::max<int64_t>(1, (int64_t{p.num_sms} * kMmaBlocksPerSm + p.token_count - 1) / p.token_count));
    const dim3 grid(static_cast<unsigned>(p.token_count), static_cast<unsigned>(per_token));
    // Prefill-sized rows per sequence: the multi-token kernel (DSERVE_INDEXER_MT=0 at the caller: never).
    const bool mt = p.multi_token && p.max_q_len >= kIndexerMultiTokenMinRows;
    if (mt && p.wgmma && p.q_scale >= 0.0f && indexer_wgmma_supported(p.heads, p.dim))
      return launch_indexer_scores_wgmma(p, stream);
    const cudaError_t e = p.heads <= 16   ? launch_mma_dim<16>(p, grid, mt, stream)
                          : p.heads <= 32 ? launch_mma_dim<32>(p, grid, mt, stream)
                                          : launch_mma_dim<64>(p, grid, mt, stream);
    if (e != cudaSuccess) return e;
  } else {
    const size_t smem = sizeof(float) * (p.heads * p.dim + p.heads);
    if (smem > 48 * 1024) {
      static PerDevice<cudaError_t> attr;
      const cudaError_t e = attr.get([] {
        return cudaFuncSetAttribute(indexer_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    227 * 1024);
      });
      if (e != cudaSuccess) return e;
      if (smem > 227 * 1024) return cudaErrorInvalidValue;
    }
    const dim3 grid(static_cast<unsigned>(p.token_count),
                    static_cast<unsigned>((p.score_cols + kPositionsPerBlock - 1) / kPositionsPerBlock));
    if (const cudaError_t e = launch_plain(indexer_scores_kernel, grid, kScoreThreads, smem, stream, p);
        e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

cudaError_t launch_indexer_select(const IndexerParams& p, cudaStream_t stream) {
  if (p.token_count == 0) return cudaSuccess;
  if (p.topk > kIndexerMaxTopk || p.topk < 1 || p.score_cols < 1) return cudaErrorInvalidValue;
  const int staged_cap = std::min(p.score_cols, kSelectStage);
  const size_t select_smem = sizeof(int) * (kSelectBuckets + kSelectCandidates + size_t{1} * staged_cap);
  static PerDevice<cudaError_t> select_attr;
  if (const cudaError_t e = select_attr.get([] {
        return cudaFuncSetAttribute(indexer_select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(sizeof(int) * (kSelectBuckets + kSelectCandidates + kSelectStage)));
      });
      e != cudaSuccess)
    return e;
  return launch_plain(indexer_select_kernel, static_cast<unsigned>(p.token_count), kSelectThreads, select_smem, stream,
                      p, staged_cap);
}

cudaError_t launch_indexer_topk(const IndexerParams& p, bool mma, cudaStream_t stream) {
  if (const cudaError_t e = launch_indexer_scores(p, mma, stream); e != cudaSuccess) return e;
  return launch_indexer_select(p, stream);
}

}  // namespace ds::kernels
