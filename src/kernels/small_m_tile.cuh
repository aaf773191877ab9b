// Device helpers shared by the small-M weight-stream kernels (gemm_small_m.cu, moe_gemm.cu's decode path):
// cp.async staging and the per-warp round loop of a [N, K]-weight x (up to 16 rows) product on mma.sync.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/ptx.cuh"

namespace ds::kernels::small_m {

using ptx::mma_bf16;


// 16-byte global -> shared copies that are in flight together until the wait: loading into registers let the
// compiler interleave each load with its mma (one load in flight per warp, ~1 TB/s at best; measured).
// ok = false zero-fills the destination and reads nothing. Weights bypass L1 (.cg), activations use it (.ca).
__device__ __forceinline__ void cp_async_cg(void* smem, const void* gmem, bool ok) { ptx::cp_async16(smem, gmem, ok); }
__device__ __forceinline__ void cp_async_ca(void* smem, const void* gmem, bool ok) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

// kUnrollOverride > 0 replaces the default chunks per round (a kernel whose K fits one shorter round takes less
// shared memory, so more CTAs share an SM).
template <int NT, bool kM16, int kUnrollOverride = 0>
struct NkShape {
  static constexpr int kUnroll = kUnrollOverride > 0 ? kUnrollOverride : NT == 1 && !kM16 ? 8 : 4;  // chunks per warp per round
  static constexpr int kSlots = kUnroll * (NT + (kM16 ? 2 : 1));  // 512-byte slots per warp per round
};

// Step u of a round: the copies of chunk c of the NT weight rows into their slots (zeros past K or past N).
template <int NT>
__device__ __forceinline__ void copy_weights(const __nv_bfloat16* const (&wrow)[NT], const bool (&wok)[NT], int64_t c,
                                             int64_t chunks, int u, uint4* my) {
  const bool in = c < chunks;
  const int64_t off = (in ? c : 0) * 32;
#pragma unroll
  for (int t = 0; t < NT; ++t) cp_async_cg(&my[(u * NT + t) * 32], wrow[t] + off, in && wok[t]);
}

// The weight copies of this warp's first round (what accumulate_rows<..., true> expects already issued): weights
// are never written during a forward, so a kernel may issue them before its PDL wait.
template <int NT, int kUnroll>
__device__ __forceinline__ void issue_first_weights(const __nv_bfloat16* const (&wrow)[NT], const bool (&wok)[NT],
                                                    int64_t K, int warp, int warps, uint4* my) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) copy_weights<NT>(wrow, wok, warp + u * warps, K / 32, u, my);
  ptx::cp_async_commit();
}

// One warp's share of a CTA's K loop: chunks warp, warp + warps, ... (32-deep) of NT 8-row weight tiles
// (wrow[t]: this lane's row g of tile t at k = tig * 8; wok[t] false: zeros) times the rows xrow0 (row g) and
// xrow1 (row g + 8, kM16 only), accumulated in the m16n8 fragments acc[t]. `my` is this lane's slot 0 of the
// warp's staging area (kSlots * 32 uint4, slot s at my[s * 32]). In a chunk, lane (g, tig) takes 16
// contiguous bytes (k = tig * 8 .. + 7) of weight row g and of rows g, g + 8 and feeds them to two k16 mmas:
// logical k {2 tig, 2 tig + 1, 2 tig + 8, 2 tig + 9} of the first are physical tig * 8 + {0, 1, 2, 3}, of the
// second + 4; both operands use the same permutation, so every product still pairs matching k. Each round
// stages kUnroll chunks with cp.async (all in flight together), then multiplies; a lane reads back only the
// slots it copied itself. kFirstWeightsIssued: round 0's weights were issued already (issue_first_weights).
template <int NT, bool kM16, int kUnroll = NkShape<NT, kM16>::kUnroll, bool kFirstWeightsIssued = false>
__device__ __forceinline__ void accumulate_rows(const __nv_bfloat16* const (&wrow)[NT], const bool (&wok)[NT],
                                                const __nv_bfloat16* xrow0, bool xok0, const __nv_bfloat16* xrow1,
                                                bool xok1, int64_t K, int warp, int warps, uint4* my,
                                                float (&acc)[NT][4]) {
  // Round r, step u of warp w: chunk w + (r * kUnroll + u) * warps (adjacent warps read adjacent bytes).
  const int64_t chunks = K / 32;
  for (int64_t c0 = warp; c0 < chunks; c0 += warps * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * warps;
      const bool in = c < chunks;
      const int64_t off = (in ? c : 0) * 32;
      if (!kFirstWeightsIssued || c0 != warp) copy_weights<NT>(wrow, wok, c, chunks, u, my);
      cp_async_ca(&my[(kUnroll * NT + u) * 32], xrow0 + off, in && xok0);
      if (kM16) cp_async_ca(&my[(kUnroll * (NT + 1) + u) * 32], xrow1 + off, in && xok1);
    }
    cp_async_wait_all();
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint4 xa = my[(kUnroll * NT + u) * 32];
      const uint4 xb = kM16 ? my[(kUnroll * (NT + 1) + u) * 32] : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const uint4 wv = my[(u * NT + t) * 32];
        mma_bf16(acc[t], xa.x, xb.x, xa.y, xb.y, wv.x, wv.y);
        mma_bf16(acc[t], xa.z, xb.z, xa.w, xb.w, wv.z, wv.w);
      }
    }
  }

}

// The end of a CTA's tile in the MoE decode kernels (moe_gemm.cu, moe_fp8.cu): the kWarps warps' partial C
// fragments (red[warp][t * 4 + c][lane]) added in warp order by the first four warps and stored as bf16 rows
// [row0, row0 + cnt) of out [rows, N] x the kDown n8 column tiles from n0; with the SiLU the NT = 2 kDown tiles are
// kDown gate tiles then their up tiles, and out = silu(gate) x up. C fragment: c0, c1 = row g, columns 2 tig +
// {0, 1}; c2, c3 = row g + 8.
template <bool kSilu, int kDown, int NT, int kWarps>
__device__ __forceinline__ void store_tile(const float (*red)[NT * 4][32], void* out, int64_t N, int64_t n0,
                                           int64_t row0, int cnt) {
  static_assert(NT == (kSilu ? 2 : 1) * kDown, "NT: the kDown tiles (and their up tiles)");
  const int c = threadIdx.x / 32, l = threadIdx.x % 32;
  const int m = (l >> 2) + (c >= 2 ? 8 : 0);
  if (threadIdx.x >= 4 * 32 || m >= cnt) return;
  float v[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    v[t] = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) v[t] += red[wi][t * 4 + c][l];
  }
  const int64_t n = n0 + (l & 3) * 2 + (c & 1);
  __nv_bfloat16* o = static_cast<__nv_bfloat16*>(out) + (row0 + m) * N;
  if (kSilu) {
#pragma unroll
    for (int t = 0; t < kDown; ++t)
      if (n + 8 * t < N) o[n + 8 * t] = __float2bfloat16(v[t] / (1.0f + expf(-v[t])) * v[t + kDown]);
  } else {
#pragma unroll
    for (int t = 0; t < NT; ++t)
      if (n + 8 * t < N) o[n + 8 * t] = __float2bfloat16(v[t]);
  }
}

}  // namespace ds::kernels::small_m
