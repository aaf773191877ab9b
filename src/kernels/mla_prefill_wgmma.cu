// MLA prefill attention in MHA form on Hopper's wgmma (see mla_prefill.h; same semantics as the mma.sync kernel):
// one block of two warpgroups per (128 query rows, head, sequence), each warpgroup owning 64 rows. S = Q K^T as
// m64n64k16 or m64n128k16 (64- or 128-key tiles) with Q and the key tile K-major in shared memory (128-byte swizzle),
// the online softmax in fp32 registers, then O += P V as m64n128k16 with P taken straight from the S accumulators as
// the register A operand and the value tile MN-major. Key / value tiles stream through a ring of stages (three of 64
// keys, two of 128) filled by a producer warp's TMA boxes, full / empty mbarriers a stage, so the two consumer
// warpgroups never meet at a block barrier (session 64, H100: V3 128 heads x 4,096 459.5 TFLOP/s vs 370.0 for the first
// form, every thread's cp.async and a block barrier a tile, whose barrier stalls ncu had put first; that form stays for
// where the tensor maps cannot be made). The row tiles run longest first (the causal tail). Measured and
// removed (BENCHMARKS.md): the next tile's S issued before this tile's softmax (session 61: a tie), one warpgroup a
// block at two blocks an SM (0.68x); FlashAttention-3's intra-warpgroup overlap, twice (session 64, cp.async form,
// four 64-key stages: 350 TFLOP/s at V3 128 x 4,096 vs 370 for 128-key tiles without it; session 65, TMA ring, 64-key
// tiles: 424 vs 467 TFLOP/s, V3 4 layers 32K prefill 0.546 vs 0.520 s) and its warpgroup ping-pong (session 65, named
// barriers handing the turn to issue S: 453 vs 467 TFLOP/s, 32K prefill 0.525 vs 0.520 s). What bounded it was the
// mask test inside the unrolled score loops (see step; session 65: 476 -> 567 TFLOP/s, 0.72 of cuBLASLt's 790). The
// ping-pong measured again after that fix still loses (549 vs 584 TFLOP/s, 8K prefill 0.067 vs 0.066 s).
#include <cuda_bf16.h>

#include "kernels/mla_merge.cuh"
#include "kernels/mla_prefill.h"
#include "kernels/mla_prefill_rows.cuh"
#include "kernels/pdl.cuh"
#include "kernels/per_device.h"
#include "kernels/ptx.cuh"
#include "kernels/tensor_map.h"
#include "kernels/wgmma.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kNope = 128, kQk = 192, kV = 128;  // qk = nope + rope (64)
constexpr int kQkChunks = kQk / 8;  // 16-byte chunks of a Q / K row: 24 (three 128-byte panels)
constexpr int kQWgBytes = 3 * 64 * 128;  // a warpgroup's 64 Q rows: three panels of 64 rows x 128 B
constexpr int kThreads = 256;            // two warpgroups
constexpr int kBq = 128;                 // query rows a block, 64 a warpgroup (the wgmma M)
constexpr int kSmemKv = 2 * kQWgBytes;   // key / value stages after Q (48 KB)
// Keys a tile BK (64 or 128): the key tile is three panels of BK rows, the value tile two.
// kTma: the stages filled by a producer warp's TMA boxes (mbarriers full / empty per stage after them) instead of
// every thread's cp.async with a block barrier a tile.
template <int BK, bool kTma = false>
struct Tiles {
  static constexpr int kPanel = BK * 128;
  static constexpr int kKBytes = 3 * kPanel, kVBytes = 2 * kPanel, kStageBytes = kKBytes + kVBytes;  // 40 / 80 KB
  static constexpr int kStages = BK == 64 ? 3 : 2;
  static constexpr int kSmemBar = kSmemKv + kStages * kStageBytes;  // uint64 full[kStages], empty[kStages] (kTma)
  static constexpr int kSmemBytes = kSmemBar + (kTma ? 16 * kStages : 0) + 1024;  // + alignment slack: 169 / 209 KB
  static_assert(kSmemBytes <= 232448, "exceeds the 227 KB opt-in shared memory of sm_90");
};
constexpr int kTmaThreads = kThreads + 32;  // the consumers' two warpgroups, then the producer warp
constexpr float kLog2e = 1.4426950408889634f;

// Byte offset of 16-byte chunk c of row r in a [panels][rows][128 B] tile (panel = rows x 128 B), 128-byte swizzle:
// the layout wgmma reads for K-major and MN-major operands alike.
__device__ __forceinline__ uint32_t tile_offset(int r, int c, int panel) {
  return (c >> 3) * panel + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// First context row of sequence `seq` in kv / ctx: the sum of the earlier sequences' lengths.
__device__ int64_t context_base(const int32_t* seq_lens, int seq) {
  __shared__ int64_t base_sh;
  if (threadIdx.x == 0) {
    int64_t b = 0;
    for (int s = 0; s < seq; ++s) b += seq_lens[s];
    base_sh = b;
  }
  __syncthreads();
  return base_sh;
}

// The key / value tile loads as two loops whose thread -> (row, chunk) maps are shifts (k_nope with v, then the rope
// key). One loop over 40 chunks a row with a division, a remainder and three branches that split warps made ALU the
// busiest pipe (ncu, s61g: 28%, 20 of 32 threads active); the shifts doubled the kernel (H100, session 62: V3 128
// heads x 4,096 185 -> 370 TFLOP/s; V3 4 layers 32K prefill 1.05 -> 0.61 s).
// kv_map / ctx_map (kTma only): kv as [ctx_rows, H * (nope + v)] and ctx as [ctx_rows, ctx_dim], boxes of 64 columns
// x BK rows, 128-byte swizzle (the tiles' layout), zeros past the last row.
// kAllow: p.allow is set (DSA top-k masks): every tile masked, its bits read a word a row per 32 columns. Its own kernel:
// the word loads' registers made the plain kernel spill (168, the cap of 9 warps, 3 on a scheduler).
template <int BK, bool kTma, bool kAllow>
__device__ __forceinline__ void mla_prefill_wgmma_body(const MlaPrefillParams& p, const CUtensorMap* kv_map,
                                                       const CUtensorMap* ctx_map) {
  using T = Tiles<BK, kTma>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_align1024(smem_raw);
  const uint32_t sbase = smem_u32(smem);
  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // the longest row tiles first
  const int h = blockIdx.y, seq = blockIdx.z;
  const int q0 = p.q_starts[seq];
  const int qn = p.q_starts[seq + 1] - q0;
  if (qt * kBq >= qn) return;  // block-uniform
  const uint32_t full_bar = sbase + T::kSmemBar, empty_bar = full_bar + 8 * T::kStages;
  if constexpr (kTma) {
    if (threadIdx.x == 0) mbar_init_ring(full_bar, empty_bar, T::kStages, kThreads);  // every consumer releases
  }
  const int64_t cb = context_base(p.seq_lens, seq);  // (its barrier also publishes the mbarriers)
  const int seq_len = p.seq_lens[seq];
  const int H = p.num_heads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int row_first = qt * kBq;
  const int kv_end = min(seq_len, p.positions[q0 + min(row_first + kBq - 1, qn - 1)] + 1);
  const int n_kt = (max(kv_end, 0) + BK - 1) / BK;
  const int first_pos = p.positions[q0 + row_first];  // rows of a sequence hold increasing positions

  if constexpr (kTma) {
    if (warp == kThreads / 32) {  // the producer warp: one lane streams every tile's five boxes through the ring
      if (lane == 0) {
        for (int kt = 0; kt < n_kt; ++kt) {
          const int st = kt % T::kStages, round = kt / T::kStages;
          if (round > 0) mbar_wait(empty_bar + st * 8, (round - 1) & 1);
          const uint32_t full = full_bar + st * 8, dk = sbase + kSmemKv + st * T::kStageBytes, dv = dk + T::kKBytes;
          mbar_expect_tx(full, T::kStageBytes);
          // Rows past the sequence's context are other sequences' (masked out of S, so P is 0 there) or zeros.
          const int row = static_cast<int>(cb) + kt * BK, col = h * (kNope + kV);
          tma_load_box(dk, kv_map, col, row, full);
          tma_load_box(dk + T::kPanel, kv_map, col + 64, row, full);
          tma_load_box(dk + 2 * T::kPanel, ctx_map, static_cast<int>(p.rope_offset), row, full);
          tma_load_box(dv, kv_map, col + kNope, row, full);
          tma_load_box(dv + T::kPanel, kv_map, col + kNope + 64, row, full);
        }
      }
      return;  // no block-wide barrier follows: the consumers sync on named barrier 1 and the mbarriers
    }
  }

  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q);
  const __nv_bfloat16* kv = static_cast<const __nv_bfloat16*>(p.kv);
  const __nv_bfloat16* ctx = static_cast<const __nv_bfloat16*>(p.ctx);

  // Q rows (zero-filled past the sequence's rows): warpgroup r / 64's tile.
  for (int idx = tid; idx < kBq * kQkChunks; idx += kThreads) {
    const int r = idx / kQkChunks, c = idx % kQkChunks;
    const bool ok = row_first + r < qn;
    const __nv_bfloat16* src = ok ? q + (static_cast<int64_t>(q0 + row_first + r) * H + h) * kQk + c * 8 : q;
    cp_async16(sbase + (r >> 6) * kQWgBytes + tile_offset(r & 63, c, 64 * 128), src, ok);
  }
  // One tile of keys: K = [k_nope | rope key] and V, zero rows past the block's context end.
  auto load_tile = [&](int kt) {
    const uint32_t dk = sbase + kSmemKv + (kt % T::kStages) * T::kStageBytes, dv = dk + T::kKBytes;
    static_assert(kThreads == 256 && BK % 32 == 0, "16 rows of k_nope / v, 32 of rope keys a pass");
    const int c16 = tid & 15, c8 = tid & 7;
    for (int r = tid >> 4; r < BK; r += kThreads / 16) {  // k_nope chunk c16 and v chunk c16 of row r
      const int j = kt * BK + r;
      const bool ok = j < kv_end;
      const __nv_bfloat16* kvrow = kv + ((cb + (ok ? j : 0)) * H + h) * (kNope + kV);
      cp_async16(dk + tile_offset(r, c16, T::kPanel), ok ? kvrow + c16 * 8 : kv, ok);
      cp_async16(dv + tile_offset(r, c16, T::kPanel), ok ? kvrow + kNope + c16 * 8 : kv, ok);
    }
    for (int r = tid >> 3; r < BK; r += kThreads / 8) {  // rope key chunk c8 of row r
      const int j = kt * BK + r;
      const bool ok = j < kv_end;
      const __nv_bfloat16* rope = ctx + (cb + (ok ? j : 0)) * p.ctx_dim + p.rope_offset;
      cp_async16(dk + tile_offset(r, kNope / 8 + c8, T::kPanel), ok ? rope + c8 * 8 : ctx, ok);
    }
  };

  // This thread's two rows of its warpgroup's 64 (the wgmma accumulator layout).
  const int r0 = wg * 64 + (warp & 3) * 16 + (lane >> 2), r1 = r0 + 8;
  const int t0 = q0 + row_first + r0, t1 = q0 + row_first + r1;
  const int pos0 = row_first + r0 < qn ? p.positions[t0] : -1;
  const int pos1 = row_first + r1 < qn ? p.positions[t1] : -1;
  const float sl2 = p.scale * kLog2e;

  float o[64];  // O rows r0 / r1, value columns 8 j + 2 (lane % 4) + {0, 1}: o[4 j + {0, 1}] and o[4 j + {2, 3}]
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  fence_regs(o);  // zeroed here, not sunk among the wgmma (ptxas would serialise them: C7515)
  // S, the wgmma's target (copied out before the softmax): rows r0 / r1, tile columns 8 j + 2 (lane % 4) + {0, 1},
  // laid out as O.
  float sn[BK / 2];
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  const uint64_t dq = make_desc(sbase + wg * kQWgBytes, 16, 1024);
  const auto stage_of = [&](int kt) { return sbase + kSmemKv + (kt % T::kStages) * T::kStageBytes; };
  const auto issue_qk = [&](int kt) {
    const uint64_t dk = opaque(make_desc(stage_of(kt), 16, 1024));
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kQk / 16; ++k) {
      // in the descriptor's 16-byte units: Q's panels are 64 rows, the key tile's BK
      const uint32_t off_q = ((k >> 2) * (64 * 128) + (k & 3) * 32) >> 4;
      const uint32_t off_k = ((k >> 2) * T::kPanel + (k & 3) * 32) >> 4;
      wgmma_bf16_ss<0>(sn, dq + off_q, dk + off_k, k > 0);  // m64n64k16 / m64n128k16 by BK
    }
    wgmma_commit();
  };

  // One tile: S(kt) issued and waited -> masked online softmax -> O += P V(kt) waited. Stage reuse: tile
  // kt + kStages - 1 goes into tile kt - 1's stage once every thread has waited for its wgmma.
  const auto step = [&](int kt) {
    if constexpr (kTma) {
      mbar_wait(full_bar + (kt % T::kStages) * 8, (kt / T::kStages) & 1);  // tile kt's boxes landed
    } else {
      cp_async_wait<T::kStages - 2>();  // tile kt landed for this thread
      fence_proxy_async();
      __syncthreads();  // ... for every thread; both warpgroups done with tile kt - 1's stage
      if (kt + T::kStages - 1 < n_kt) load_tile(kt + T::kStages - 1);
      cp_async_commit();
    }
    issue_qk(kt);
    wgmma_wait<0>();
    fence_regs(sn);
    float s[BK / 2];
#pragma unroll
    for (int i = 0; i < BK / 2; ++i) s[i] = sn[i];

    // Mask (context end, causality, DSA bits) where the tile reaches past the block's first row, then the online
    // softmax in log2 units. The test is made once a tile, outside the unrolled loops: inside them ptxas branched
    // around the mask per pair of scores, and those branches' instruction-fetch stalls drew 29% of the kernel's stall
    // samples (ncu source page, s65c). The scale goes into the exponent's FFMA (p = 2^(s sl2 - max)), so an unmasked
    // tile is only its maxima; sl2 > 0, so max(s) sl2 = max(s sl2).
    const int j_first = kt * BK;
    if (kAllow || j_first + BK - 1 > first_pos || j_first + BK > kv_end) {
#pragma unroll
      for (int w = 0; w < BK / 32; ++w) {  // 32 columns a pass: one word of DSA bits a row (none past its rows)
        uint32_t w0 = ~0u, w1 = ~0u;
        if constexpr (kAllow) {
          const int word = (j_first >> 5) + w;  // j_first is a multiple of 32
          w0 = pos0 >= 0 && word < p.allow_words ? p.allow[static_cast<int64_t>(t0) * p.allow_words + word] : 0u;
          w1 = pos1 >= 0 && word < p.allow_words ? p.allow[static_cast<int64_t>(t1) * p.allow_words + word] : 0u;
        }
#pragma unroll
        for (int j = 4 * w; j < 4 * w + 4; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int bit = (8 * j + 2 * (lane & 3) + e) & 31, col = j_first + 8 * j + 2 * (lane & 3) + e;
            const bool va = col < kv_end && col <= pos0 && ((w0 >> bit) & 1u);
            const bool vb = col < kv_end && col <= pos1 && ((w1 >> bit) & 1u);
            s[4 * j + e] = va ? s[4 * j + e] : -INFINITY;
            s[4 * j + 2 + e] = vb ? s[4 * j + 2 + e] : -INFINITY;
          }
      }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) {
      mx0 = fmaxf(mx0, fmaxf(s[4 * j], s[4 * j + 1]));
      mx1 = fmaxf(mx1, fmaxf(s[4 * j + 2], s[4 * j + 3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0 * sl2), n1 = fmaxf(m1, mx1 * sl2);
    const float a0 = n0 == -INFINITY ? 1.0f : fast_exp2(m0 - n0);
    const float a1 = n1 == -INFINITY ? 1.0f : fast_exp2(m1 - n1);
    m0 = n0;
    m1 = n1;
    const float b0 = m0 == -INFINITY ? 0.0f : m0, b1 = m1 == -INFINITY ? 0.0f : m1;
    l0 *= a0;
    l1 *= a1;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[4 * j] *= a0;
      o[4 * j + 1] *= a0;
      o[4 * j + 2] *= a1;
      o[4 * j + 3] *= a1;
    }
    fence_regs(o);
    uint32_t pf[BK / 16][4];  // P as the A fragments of the k16 steps over the tile's keys
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) {
      const float p00 = fast_exp2(fmaf(s[4 * j], sl2, -b0)), p01 = fast_exp2(fmaf(s[4 * j + 1], sl2, -b0));
      const float p10 = fast_exp2(fmaf(s[4 * j + 2], sl2, -b1)), p11 = fast_exp2(fmaf(s[4 * j + 3], sl2, -b1));
      l0 += p00 + p01;
      l1 += p10 + p11;
      pf[j >> 1][(j & 1) * 2] = pack_bf16(p00, p01);
      pf[j >> 1][(j & 1) * 2 + 1] = pack_bf16(p10, p11);
    }

    const uint64_t dv = opaque(make_desc(stage_of(kt) + T::kKBytes, T::kPanel, 1024));
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k) wgmma_bf16_rs_tnsp_b(o, pf[k], dv + ((k * 16 * 128) >> 4));
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    if constexpr (kTma) mbar_arrive(empty_bar + (kt % T::kStages) * 8);  // this thread is done with the stage
  };

  if constexpr (kTma) {
    // Q alone in the first group, visible to both warpgroups' wgmma before the first tile.
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    named_barrier(1, kThreads);
  } else {
    // Prologue: Q with tile 0 in the first group, tiles 1 .. kStages - 2 one group each.
#pragma unroll
    for (int i = 0; i < T::kStages - 1; ++i) {
      if (i < n_kt) load_tile(i);
      cp_async_commit();
    }
  }
  for (int kt = 0; kt < n_kt; ++kt) step(kt);
  wgmma_wait<0>();
  fence_regs(o);
  cp_async_wait<0>();

  store_prefill_row<kV>(p, h, lane, t0, pos0, m0, l0, [&](int j) { return make_float2(o[4 * j], o[4 * j + 1]); });
  store_prefill_row<kV>(p, h, lane, t1, pos1, m1, l1, [&](int j) { return make_float2(o[4 * j + 2], o[4 * j + 3]); });
}

template <int BK, bool kAllow>
__global__ void __launch_bounds__(kThreads, 1) mla_prefill_wgmma_kernel(const MlaPrefillParams p) {
  mla_prefill_wgmma_body<BK, false, kAllow>(p, nullptr, nullptr);
}

template <int BK, bool kAllow>
__global__ void __launch_bounds__(kTmaThreads, 1)
    mla_prefill_tma_kernel(const MlaPrefillParams p, const __grid_constant__ CUtensorMap kv_map,
                           const __grid_constant__ CUtensorMap ctx_map) {
  mla_prefill_wgmma_body<BK, true, kAllow>(p, &kv_map, &ctx_map);
}

template <int BK, bool kAllow>
cudaError_t launch_bk(const MlaPrefillParams& p, cudaStream_t stream, bool tma) {
  static PerDevice<cudaError_t> attrs;
  const cudaError_t e = attrs.get([] {
    const cudaError_t a = cudaFuncSetAttribute(mla_prefill_wgmma_kernel<BK, kAllow>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, Tiles<BK>::kSmemBytes);
    return a != cudaSuccess ? a
                            : cudaFuncSetAttribute(mla_prefill_tma_kernel<BK, kAllow>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   Tiles<BK, true>::kSmemBytes);
  });
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((p.max_q_len + kBq - 1) / kBq), static_cast<unsigned>(p.num_heads),
                  static_cast<unsigned>(p.num_seqs));
  // The maps' rows are the context rows the box coordinates (int) address; 16-byte aligned bases and strides. Where
  // they cannot be made (no row count, a driver without the encoder), every thread's cp.async loads the tiles.
  const int64_t kv_cols = int64_t{p.num_heads} * (kNope + kV);
  CUtensorMap kv_map, ctx_map;
  const bool maps = tma && p.ctx_rows > 0 && p.ctx_rows <= INT32_MAX && !(reinterpret_cast<uintptr_t>(p.kv) & 15) &&
                    !(reinterpret_cast<uintptr_t>(p.ctx) & 15) && (p.ctx_dim * 2) % 16 == 0 &&
                    encode_2d_swizzle128(&kv_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.kv,
                                         static_cast<uint64_t>(kv_cols), static_cast<uint64_t>(p.ctx_rows),
                                         static_cast<uint64_t>(kv_cols) * 2, 64, BK) &&
                    encode_2d_swizzle128(&ctx_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.ctx,
                                         static_cast<uint64_t>(p.ctx_dim), static_cast<uint64_t>(p.ctx_rows),
                                         static_cast<uint64_t>(p.ctx_dim) * 2, 64, BK);
  if (!maps)
    return launch_plain(mla_prefill_wgmma_kernel<BK, kAllow>, grid, kThreads, Tiles<BK>::kSmemBytes, stream, p);
  return launch_plain(mla_prefill_tma_kernel<BK, kAllow>, grid, kTmaThreads, Tiles<BK, true>::kSmemBytes, stream, p, kv_map,
                      ctx_map);
}

}  // namespace

cudaError_t launch_mla_prefill_wgmma(const MlaPrefillParams& p, cudaStream_t stream, int keys_per_tile, bool tma) {
  if (p.num_tokens == 0 || p.num_seqs == 0 || p.max_q_len == 0) return cudaSuccess;
  if (!mla_prefill_fast_supported(p.nope, p.rope, p.v, p.ctx_dim, p.rope_offset)) return cudaErrorInvalidValue;
  const bool allow = p.allow != nullptr;
  if (keys_per_tile == 64) return allow ? launch_bk<64, true>(p, stream, tma) : launch_bk<64, false>(p, stream, tma);
  if (keys_per_tile == 128)
    return allow ? launch_bk<128, true>(p, stream, tma) : launch_bk<128, false>(p, stream, tma);
  return cudaErrorInvalidValue;
}

}  // namespace ds::kernels
