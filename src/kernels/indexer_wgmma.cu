// V3.2 lightning-indexer scores at prefill on Hopper's wgmma (see indexer.h): the multi-token kernel's work (four
// query rows of one sequence a block, each 64-head query scored against a shared key tile) with the products read by
// the tensor cores straight from shared memory instead of through ldmatrix (ncu, session 61: the mma.sync kernel is
// bound by its shared-memory loads, 74%). A block of two warpgroups takes 128 positions a tile, 64 a warpgroup: S^T
// [64 positions x (4 tokens x 64 heads)] = K Q^T as m64n256k16 (keys A, queries B, both K-major, 128-byte swizzle),
// then the weighted ReLU sum over each token's heads in registers. 64 heads of 128 dims only (V3.2's shape).
// The default where it applies (H100, session 62: scores 8K x 8K 2,222 -> 2,000 us); DSERVE_INDEXER_WGMMA=0 = mma.sync.
// The key tiles come from a producer warp's TMA boxes where the pages are 64 positions (session 65, H100: 8K x 8K
// 1,188 vs 2,017 us, 463 vs 273 TFLOP/s; 32K x 2K 494 vs 280), else every thread's cp.async and a block barrier a
// tile (ncu, session 65: barrier the first stall reason, 1.16 a issued instruction).
#include <cuda_bf16.h>

#include "kernels/indexer.h"
#include "kernels/pdl.cuh"
#include "kernels/per_device.h"
#include "kernels/ptx.cuh"
#include "kernels/tensor_map.h"
#include "kernels/wgmma.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kTokens = 4;     // query rows a block
constexpr int kHeads = 64, kDim = 128;
constexpr int kCols = kTokens * kHeads;  // 256: the wgmma N
constexpr int kTile = 128;               // positions a tile, 64 a warpgroup (the wgmma M)
constexpr int kChunks = kDim / 8;        // 16-byte chunks of a row: 16, two 128-byte panels
constexpr int kQPanel = kCols * 128;     // 32 KB
constexpr int kKPanel = kTile * 128;     // 16 KB
constexpr int kSmemQ = 0;
constexpr int kSmemK = 2 * kQPanel;                  // the stages of 2 x kKPanel after Q
constexpr int kStageBytes = 2 * kKPanel;
// kTma (the default for 64-position pages): the stages filled by a producer warp's TMA boxes through full /
// empty mbarriers (one page of 64 positions x 64 dims a box), so the warpgroups, which read disjoint halves of each
// tile, never meet at a block barrier; four stages.
template <bool kTma>
struct Layout {
  static constexpr int kStages = kTma ? 4 : 2;
  static constexpr int kSmemW = kSmemK + kStages * kStageBytes;  // float [kTokens][kHeads] scaled head weights
  static constexpr int kSmemBar = kSmemW + kCols * 4;            // uint64 full[kStages], empty[kStages] (kTma)
  static constexpr int kSmemBytes = kSmemBar + (kTma ? 16 * kStages : 0) + 1024;  // + alignment slack: 130 / 194 KB
  static_assert(kSmemBytes <= 232448, "exceeds the 227 KB opt-in shared memory of sm_90");
};
constexpr int kTmaThreads = kThreads + 32;  // the consumers' two warpgroups, then the producer warp
constexpr int kTmaPage = 64;                // positions a page (a box's rows)

// Byte offset of 16-byte chunk c of row r in a [2 panels][rows][128 B] tile (panel bytes given), 128-byte swizzle.
__device__ __forceinline__ uint32_t tile_offset(int r, int c, int panel) {
  return (c >> 3) * panel + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

__device__ __forceinline__ float head_weight_of(const IndexerParams& p, int64_t t, int h) {
  return (p.w_f32 ? static_cast<const float*>(p.w)[t * p.heads + h]
                  : __bfloat162float(static_cast<const __nv_bfloat16*>(p.w)[t * p.heads + h])) *
         p.w_scale;
}

// k_map (kTma only): the key cache as [k_slots, 128] bf16, boxes of 64 dims x 64 rows, 128-byte swizzle.
template <bool kTma>
__device__ __forceinline__ void indexer_scores_wgmma_body(const IndexerParams p, const CUtensorMap* k_map) {
  using L = Layout<kTma>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_align1024(smem_raw);
  const uint32_t sbase = smem_u32(smem);
  float* ws = reinterpret_cast<float*>(smem + L::kSmemW);
  const uint32_t full_bar = sbase + L::kSmemBar, empty_bar = full_bar + 8 * L::kStages;
  __shared__ int s_n[kTokens];  // context length a row (0: not this launch's)
  const int seq = blockIdx.y;
  const int q0 = p.q_starts[seq], qn = p.q_starts[seq + 1] - q0;
  const int g0 = static_cast<int>(blockIdx.x) * kTokens;
  if (g0 >= qn) return;
  const int64_t tbase = int64_t{q0} + g0;  // token of row slot 0
  const int64_t t_lo = max(tbase, p.token_begin);
  const int64_t t_hi = min(int64_t{q0} + min(g0 + kTokens, qn), p.token_begin + p.token_count);
  if (t_lo >= t_hi) return;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4;
  const auto mine = [&](int slot) { return tbase + slot >= t_lo && tbase + slot < t_hi; };
  if (tid < kTokens) s_n[tid] = mine(tid) ? p.positions[tbase + tid] + 1 : 0;
  int n_max = 0;  // the longest context of the block's rows (after the barrier that publishes s_n)
  const auto longest = [&] {
#pragma unroll
    for (int i = 0; i < kTokens; ++i) n_max = max(n_max, s_n[i]);
  };
  if constexpr (kTma) {
    if (tid == 0) mbar_init_ring(full_bar, empty_bar, L::kStages, kThreads);  // every consumer releases
    __syncthreads();  // s_n, the mbarriers
    longest();
    if (warp == kThreads / 32) {  // the producer warp: one lane streams each tile's pages through the ring
      if (lane == 0) {
        const int32_t* tbl = p.block_table + static_cast<int64_t>(seq) * p.max_pages;
        for (int tile = 0; tile * kTile < n_max; ++tile) {
          const int st = tile % L::kStages, round = tile / L::kStages;
          if (round > 0) mbar_wait(empty_bar + st * 8, (round - 1) & 1);
          const uint32_t full = full_bar + st * 8, dst = sbase + kSmemK + st * kStageBytes;
          // A page past every row's context is never read (its warpgroup skips the tile), so it is not loaded.
          const int halves = tile * kTile + kTmaPage < n_max ? 2 : 1;
          mbar_expect_tx(full, halves * kStageBytes / 2);
          for (int half = 0; half < halves; ++half) {
            const int row = tbl[(tile * kTile + half * kTmaPage) / kTmaPage] * kTmaPage;
            tma_load_box(dst + half * kTmaPage * 128, k_map, 0, row, full);
            tma_load_box(dst + kKPanel + half * kTmaPage * 128, k_map, 64, row, full);
          }
        }
      }
      return;  // no block-wide barrier follows: the consumers sync on named barrier 1 and the mbarriers
    }
  }
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q);
  for (int c = tid; c < kCols * kChunks; c += kThreads) {  // Q row (slot, head) = wgmma column slot * 64 + head
    const int row = c / kChunks, part = c % kChunks, slot = row / kHeads, h = row % kHeads;
    const bool valid = mine(slot) && h < p.heads;
    cp_async16(sbase + kSmemQ + tile_offset(row, part, kQPanel),
               valid ? q + ((tbase + slot) * p.heads + h) * kDim + part * 8 : q, valid);
  }
  for (int i = tid; i < kCols; i += kThreads) {
    const int slot = i / kHeads, h = i % kHeads;
    // q_scale >= 0 folded in: w relu(q_scale x) = (w q_scale) relu(x), one multiply a head instead of one a score.
    ws[i] = mine(slot) && h < p.heads ? head_weight_of(p, tbase + slot, h) * p.q_scale : 0.0f;
  }
  if constexpr (kTma) {
    cp_async_commit();  // Q alone, visible to both warpgroups' wgmma (and ws) before the first tile
    cp_async_wait<0>();
    fence_proxy_async();
    named_barrier(1, kThreads);
  } else {
    __syncthreads();  // s_n
    longest();
  }
  const int32_t* table = p.block_table + static_cast<int64_t>(seq) * p.max_pages;
  const __nv_bfloat16* kc = static_cast<const __nv_bfloat16*>(p.k_cache);
  const auto load_tile = [&](int tile) {
    const uint32_t dst = sbase + kSmemK + (tile % 2) * kStageBytes;
    for (int c = tid; c < kTile * kChunks; c += kThreads) {
      const int row = c / kChunks, part = c % kChunks, j = tile * kTile + row;
      const bool valid = j < n_max;  // positions past every row's context are zero-filled, their pages never read
      const __nv_bfloat16* src =
          valid ? kc + (static_cast<int64_t>(table[j / p.page_size]) * p.page_size + j % p.page_size) * kDim + part * 8
                : kc;
      cp_async16(dst + tile_offset(row, part, kKPanel), src, valid);
    }
    cp_async_commit();
  };
  const int tiles = (n_max + kTile - 1) / kTile;
  int n_slot[kTokens];
#pragma unroll
  for (int i = 0; i < kTokens; ++i) n_slot[i] = s_n[i];
  const uint64_t dq = make_desc(sbase + kSmemQ, 16, 1024);
  const int r0 = wg * 64 + (warp % 4) * 16 + lane / 4;  // this thread's positions of the tile: r0 and r0 + 8
  float acc[128];
  if constexpr (!kTma) {
    if (tiles > 0) load_tile(0);  // with Q in its group
  }
  for (int tile = 0; tile < tiles; ++tile) {
    if constexpr (kTma) {
      mbar_wait(full_bar + (tile % L::kStages) * 8, (tile / L::kStages) & 1);  // the tile's pages landed
    } else {
      if (tile + 1 < tiles) {
        load_tile(tile + 1);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      fence_proxy_async();
      __syncthreads();  // tile (and Q, the weights) in place for every thread
    }
    const int first = tile * kTile + wg * 64;  // this warpgroup's first position
    if (first < n_max) {                       // warpgroup-uniform
      const uint64_t dk =
          opaque(make_desc(sbase + kSmemK + (tile % L::kStages) * kStageBytes + wg * 64 * 128, 16, 1024));
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < kDim / 16; ++k) {
        const uint32_t off_k = ((k >> 2) * kKPanel + (k & 3) * 32) >> 4;  // in the descriptor's 16-byte units
        const uint32_t off_q = ((k >> 2) * kQPanel + (k & 3) * 32) >> 4;
        wgmma_bf16_ss<0>(acc, dk + off_k, dq + off_q, k > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc);
      // acc[4 j + e]: position r0, column 8 j + 2 (lane % 4) + e; acc[4 j + 2 + e]: position r0 + 8. Column = slot
      // x 64 + head: slot j / 8.
#pragma unroll
      for (int slot = 0; slot < kTokens; ++slot) {
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          const int j = slot * 8 + jj, col = 8 * j + 2 * (lane % 4);
          s0 += ws[col] * fmaxf(0.0f, acc[4 * j]) + ws[col + 1] * fmaxf(0.0f, acc[4 * j + 1]);
          s1 += ws[col] * fmaxf(0.0f, acc[4 * j + 2]) + ws[col + 1] * fmaxf(0.0f, acc[4 * j + 3]);
        }
        s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
        s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
        s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
        s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
        if (lane % 4 == 0 && n_slot[slot] > 0) {
          float* out = p.scores + (tbase + slot - p.token_begin) * p.score_cols;
          const int j0 = tile * kTile + r0;
          if (j0 < n_slot[slot]) out[j0] = s0;
          if (j0 + 8 < n_slot[slot]) out[j0 + 8] = s1;
        }
      }
    }
    if constexpr (kTma) {
      mbar_arrive(empty_bar + (tile % L::kStages) * 8);  // this thread is done with the stage
    } else {
      __syncthreads();  // the next iteration's load overwrites this stage
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) indexer_scores_wgmma_kernel(IndexerParams p) {
  indexer_scores_wgmma_body<false>(p, nullptr);
}

__global__ void __launch_bounds__(kTmaThreads, 1)
    indexer_scores_tma_kernel(IndexerParams p, const __grid_constant__ CUtensorMap k_map) {
  indexer_scores_wgmma_body<true>(p, &k_map);
}

}  // namespace

bool indexer_wgmma_supported(int64_t heads, int64_t dim) { return heads >= 1 && heads <= kHeads && dim == kDim; }

cudaError_t launch_indexer_scores_wgmma(const IndexerParams& p, cudaStream_t stream) {
  if (p.token_count == 0) return cudaSuccess;
  if (!indexer_wgmma_supported(p.heads, p.dim) || p.score_cols < 1 || !(p.q_scale >= 0.0f))
    return cudaErrorInvalidValue;
  static PerDevice<cudaError_t> attr;
  if (const cudaError_t e = attr.get([] {
        const cudaError_t a = cudaFuncSetAttribute(indexer_scores_wgmma_kernel,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, Layout<false>::kSmemBytes);
        return a != cudaSuccess ? a
                                : cudaFuncSetAttribute(indexer_scores_tma_kernel,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       Layout<true>::kSmemBytes);
      });
      e != cudaSuccess)
    return e;
  const dim3 grid(static_cast<unsigned>((p.max_q_len + kTokens - 1) / kTokens), static_cast<unsigned>(p.num_seqs));
  // The TMA form where asked and its map can be made (64-position pages, a known row count), else cp.async.
  CUtensorMap k_map;
  const bool tma = p.tma && p.page_size == kTmaPage && p.k_slots > 0 && p.k_slots <= INT32_MAX &&
                   !(reinterpret_cast<uintptr_t>(p.k_cache) & 15) &&
                   encode_2d_swizzle128(&k_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.k_cache, kDim,
                                        static_cast<uint64_t>(p.k_slots), kDim * 2, 64, kTmaPage);
  if (!tma) return launch_plain(indexer_scores_wgmma_kernel, grid, kThreads, Layout<false>::kSmemBytes, stream, p);
  return launch_plain(indexer_scores_tma_kernel, grid, kTmaThreads, Layout<true>::kSmemBytes, stream, p, k_map);
}

}  // namespace ds::kernels
