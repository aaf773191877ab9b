// Block-FP8 grouped expert GEMMs (moe_fp8.h) on mma.sync m16n8k32 e4m3 -> fp32. Two kernels with the layouts of
// moe_gemm.cu's bf16 ones, byte for byte: a 128-byte row of a stage holds 128 e4m3 values (one scale block) where
// the bf16 kernels hold 64 bf16, so the swizzle and ldmatrix addressing are unchanged and every stage is exactly
// one 128-deep K block, whose fp32 partial products are scaled (activation scale x weight scale) and added.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <cuda_bf16.h>

#include "core/env.h"
#include "kernels/moe.h"
#include "kernels/per_device.h"
#include "kernels/moe_block.cuh"
#include "kernels/occupancy.h"
#include "kernels/moe_fp8.h"
#include "kernels/moe_gemm.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/small_m_tile.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;
using bf16 = __nv_bfloat16;

// ---- decode: the small-M weight stream ----------------------------------------------------------------------
// CTA = 8 x kDown output columns of one active expert (with the fused SiLU: their gate and up rows, 2 x kDown n8
// tiles) x the expert's rows (the mma's M side, up to 16). Its 8 warps split the 128-deep K blocks; per block a lane
// stages bytes [16 tig, 16 tig + 16) and [64 + 16 tig, ...) of weight row g and of activation rows g and g + 8
// (cp.async, a round of kUnroll blocks in flight per warp), so each copy instruction reads 64 contiguous bytes of
// a row: whole 32-byte sectors. (32 contiguous bytes per lane split every sector between two instructions: twice
// the L2 requests, ~1.4 TB/s; measured.) Inside a block the k order is permuted identically for both operands
// (mma j takes the lane's staged bytes 8j..8j+3 as logical k 4tig.. and 8j+4.. as 16+4tig..), so each mma still
// pairs matching k. The activations come quantized: quantizing them in every CTA (hundreds per expert) made the
// kernel instruction-bound (V2-Lite layer at 1 token: 165 us against 49 us for bf16; measured).
constexpr int kSmallWarps = 8;

// kDown: the n8 output-column tiles a CTA covers (8 x kDown columns; with the SiLU each has its up tile too).
template <bool kSilu, bool kM16, int kUnroll, int kDown = 1>
struct SmallShape {
  static constexpr int NT = kSilu ? 2 * kDown : kDown;
  static constexpr int kRows = NT + (kM16 ? 2 : 1);  // weight tiles + activation rows staged per block
  static constexpr int kSlots = kUnroll * kRows * 2;  // 512-byte slots (32 lanes x 16 bytes) per warp per round
  static constexpr size_t kSmem = static_cast<size_t>(kSmallWarps) * kSlots * 512;
};

// Weight rows of a CTA's column tiles [0, NT) from its expert's W (e4m3) and S (scales): consecutive column tiles,
// with the SiLU the gate tiles [0, kDown), then their up tiles N rows later. N % 64 == 0 (128 with silu): each
// tile's 8 rows share one scale-block row.
template <bool kSilu, int kDown, int NT>
__device__ __forceinline__ void weight_rows(const uint8_t* W, const float* S, int64_t n0, int64_t N, int64_t K,
                                            int64_t kblocks, int g, int tig, const uint8_t** src, bool* ok,
                                            const float** srow) {
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int64_t col = n0 + 8 * (t % kDown);
    const int64_t base = (kSilu && t >= kDown ? N : 0) + col;
    const bool wok = col + g < N;
    src[t] = W + (wok ? base + g : 0) * K + tig * 16;
    ok[t] = wok;
    srow[t] = S + (base / 128) * kblocks;
  }
}

// One staged 128-deep block of one weight tile against the activation rows (qa: rows g, qb: g + 8): four mmas.
// C fragment: part[0..1] = row g, columns 2 tig + {0, 1}; part[2..3] = row g + 8.
__device__ __forceinline__ void block_mma(float (&part)[4], const uint4* w, const uint32_t (&qa)[8],
                                          const uint32_t (&qb)[8]) {
  const uint4 w0 = w[0], w1 = w[32];
  const uint32_t wr[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) mma_e4m3(part, qa[2 * j], qb[2 * j], qa[2 * j + 1], qb[2 * j + 1], wr[2 * j], wr[2 * j + 1]);
}

// kMinCtas: CTAs per SM the registers must allow (__launch_bounds__); by default the shape's.
template <bool kSilu, int kDown>
constexpr int small_min_ctas() {
  return kSilu || kDown > 1 ? 2 : 3;
}
template <bool kSilu, bool kM16, int kUnroll, int kDown, int kMinCtas>
__global__ void __launch_bounds__(kSmallWarps * 32, kMinCtas) moe_fp8_small_m_kernel(MoeFp8GemmParams p) {
  using Shape = SmallShape<kSilu, kM16, kUnroll, kDown>;
  constexpr int NT = Shape::NT, kRows = Shape::kRows;
  extern __shared__ uint4 stage[];
  __shared__ float red[kSmallWarps][NT * 4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  moe_detail::BlockRows b;
  // Slot records (kernels/moe.h) written two launches back or more (slots_settled: a quantization launch between
  // the grouping and this GEMM) are read before the wait (pdl.cuh), and the first round's weight copies then go
  // out before it too, overlapping the previous kernel and the wait.
  const bool early = p.slots && p.slots_settled;
  if (early) {
    b = moe_detail::block_rows_from_slot<kM16>(p, g);
    if (b.cnt == 0) return;  // block-uniform
  } else {
    pdl_enter();
    if (p.slots)
      b = moe_detail::block_rows_from_slot<kM16>(p, g);
    else if (!moe_detail::block_rows_from_lists<kM16>(p, g, &b))
      return;
    if (b.cnt == 0) return;  // block-uniform
  }
  const uint8_t* W = static_cast<const uint8_t*>(p.weights[b.e]);
  const float* S = p.scales[b.e];
  const int cnt = b.cnt;
  const int64_t row0 = b.row0, xr0 = b.xr0, xr1 = b.xr1;
  const int64_t N = p.N, K = p.K, kblocks = K / 128;
  constexpr int kCols = 8 * kDown;  // output columns of this CTA
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kCols;
  // Staged rows per block: weight tiles [0, NT), then activation rows g (and g + 8).
  const uint8_t* src[kRows];
  bool ok[kRows];
  const float* srow[NT];
  weight_rows<kSilu, kDown, NT>(W, S, n0, N, K, kblocks, g, tig, src, ok, srow);
  const float* sxr[2] = {nullptr, nullptr};
#pragma unroll
  for (int r = 0; r < kRows - NT; ++r) {
    const int i = g + 8 * r;
    ok[NT + r] = i < cnt;
    const int64_t xr = i < cnt ? (r == 0 ? xr0 : xr1) : 0;
    src[NT + r] = p.q + xr * K + tig * 16;
    sxr[r] = i < cnt ? p.sx + xr * kblocks : nullptr;
  }

  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[t][c] = 0.0f;
  uint4* my = stage + warp * Shape::kSlots * 32 + lane;
  // One round's copies of the weight rows (rows [0, NT)) or of the activation rows.
  auto issue = [&](int64_t c0, bool weights) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * kSmallWarps;
      const bool in = c < kblocks;
      const int64_t off = (in ? c : 0) * 128;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        uint4* d = &my[((u * kRows + r) * 2) * 32];
        if (r < NT) {
          if (!weights) continue;
          ptx::cp_async16_weight(d, src[r] + off, in && ok[r]);
          ptx::cp_async16_weight(d + 32, src[r] + off + 64, in && ok[r]);
        } else {
          if (weights) continue;
          small_m::cp_async_ca(d, src[r] + off, in && ok[r]);
          small_m::cp_async_ca(d + 32, src[r] + off + 64, in && ok[r]);
        }
      }
    }
  };
  issue(warp, true);
  if (early) pdl_enter();
  for (int64_t c0 = warp; c0 < kblocks; c0 += kSmallWarps * kUnroll) {
    if (c0 != warp) issue(c0, true);
    issue(c0, false);
    // The round's scales, loaded while its bytes are in flight: read after the wait, the (cold) weight scales
    // cost a second DRAM round trip per CTA.
    float swr[kUnroll][NT], sar[kUnroll], sbr[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * kSmallWarps;
      const int64_t cc = c < kblocks ? c : 0;
#pragma unroll
      for (int t = 0; t < NT; ++t) swr[u][t] = __ldg(srow[t] + cc);
      sar[u] = sxr[0] ? __ldg(sxr[0] + cc) : 0.0f;
      sbr[u] = kM16 && sxr[1] ? __ldg(sxr[1] + cc) : 0.0f;
    }
    small_m::cp_async_wait_all();
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * kSmallWarps;
      if (c >= kblocks) break;  // warp-uniform
      const uint4 a0 = my[((u * kRows + NT) * 2) * 32], a1 = my[((u * kRows + NT) * 2 + 1) * 32];
      const uint32_t qa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      uint32_t qb[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (kM16) {
        const uint4 b0 = my[((u * kRows + NT + 1) * 2) * 32], b1 = my[((u * kRows + NT + 1) * 2 + 1) * 32];
        const uint32_t v[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] = v[i];
      }
      const float sa = sar[u], sb = sbr[u];
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        block_mma(part, &my[((u * kRows + t) * 2) * 32], qa, qb);
        const float sw = swr[u][t];
        acc[t][0] += part[0] * sa * sw;
        acc[t][1] += part[1] * sa * sw;
        acc[t][2] += part[2] * sb * sw;
        acc[t][3] += part[3] * sb * sw;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[warp][t * 4 + c][lane] = acc[t][c];
  __syncthreads();
  small_m::store_tile<kSilu, kDown, NT, kSmallWarps>(red, p.out, N, n0, row0, cnt);
}

// The same tiles (one load round each: K <= 16 blocks; up to 8 rows an expert) walked by a grid of resident CTAs
// in two stages: a CTA issues its next tile's copies before it computes the current one, so its share of the HBM
// stays busy through the slot read, the reduction and the store that end a tile (the one-round kernel above leaves
// it idle there, and a launch of many such CTAs turns over in waves). Same per-tile arithmetic and order: same bits.
// Needs the slot records (tile t = column tile t % tiles_x of slot t / tiles_x). H100, session 25 (s25e,
// alternating, V2-Lite --quantization fp8 decode): batch 1 2.32 / 2.31 vs 2.39 / 2.37 ms, batch 8 5.05 / 5.04 vs
// 5.19 / 5.18. H200, session 26 (s26a): 2.09 / 2.09 vs 2.18 / 2.16 ms, 4.43 / 4.43 vs 4.65 / 4.62; the whole GPU
// suite with it on for every launch 172/172. The default; DSERVE_MOE_FP8_PIPE=0 = the one-round kernel.
// Experts whose weight and scale pointers the walk copies to shared memory before its PDL wait (V3: 256 + 1 fused
// shared); more are read from the global tables where used.
constexpr int kPipeTableExperts = 320;

template <bool kSilu, int kDown>
__global__ void __launch_bounds__(kSmallWarps * 32, 2) moe_fp8_small_m_pipe_kernel(MoeFp8GemmParams p, int tiles_x,
                                                                                  int total) {
  using Shape = SmallShape<kSilu, false, 2, kDown>;
  constexpr int kUnroll = 2, NT = Shape::NT, kRows = Shape::kRows;
  constexpr int kCols = 8 * kDown;
  extern __shared__ uint4 stage[];  // [2 stages][warps][kSlots][32 lanes]
  __shared__ float red[kSmallWarps][NT * 4][32];
  // The layer's pointer tables (never written by a forward) before the wait: read where a tile's expert is first
  // known (after the slot record, behind the wait for the gate|up walk), each was a cold DRAM trip on the chain.
  __shared__ const uint8_t* w_tab[kPipeTableExperts];
  __shared__ const float* s_tab[kPipeTableExperts];
  const bool tabled = p.experts <= kPipeTableExperts;
  if (tabled)
    for (int e = threadIdx.x; e < p.experts; e += blockDim.x) {
      w_tab[e] = static_cast<const uint8_t*>(p.weights[e]);
      s_tab[e] = p.scales[e];
    }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  const int64_t N = p.N, K = p.K, kblocks = K / 128;
  struct Tile {
    int cnt;
    int64_t row0, n0;
    const uint8_t* src[kRows];
    bool ok[kRows];
    const float* srow[NT];
    const float* sxr;
  };
  // Tile t from its slot record rec, loaded a tile ahead (moe_detail::WalkRec), if its slot has rows (false past
  // the end or the last slot with rows).
  auto find = [&](int t, const moe_detail::WalkRec& rec, Tile& s) {
    int4 h;
    int64_t xr0;
    if (!moe_detail::walk_rec_slot(p, rec, g, &h, &xr0)) return false;
    const uint8_t* W = tabled ? w_tab[h.x] : static_cast<const uint8_t*>(p.weights[h.x]);
    const float* S = tabled ? s_tab[h.x] : p.scales[h.x];
    s.cnt = h.y;
    s.row0 = h.z;
    s.n0 = static_cast<int64_t>(t % tiles_x) * kCols;
    weight_rows<kSilu, kDown, NT>(W, S, s.n0, N, K, kblocks, g, tig, s.src, s.ok, s.srow);
    s.ok[NT] = g < s.cnt;
    s.src[NT] = p.q + (g < s.cnt ? xr0 : 0) * K + tig * 16;
    s.sxr = g < s.cnt ? p.sx + xr0 * kblocks : nullptr;
    return true;
  };
  auto issue = [&](const Tile& s, uint4* my, bool weights) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = warp + u * kSmallWarps;
      const bool in = c < kblocks;
      const int64_t off = (in ? c : 0) * 128;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        uint4* d = &my[((u * kRows + r) * 2) * 32];
        if (r < NT) {
          if (!weights) continue;
          ptx::cp_async16_weight(d, s.src[r] + off, in && s.ok[r]);
          ptx::cp_async16_weight(d + 32, s.src[r] + off + 64, in && s.ok[r]);
        } else {
          if (weights) continue;
          small_m::cp_async_ca(d, s.src[r] + off, in && s.ok[r]);
          small_m::cp_async_ca(d + 32, s.src[r] + off + 64, in && s.ok[r]);
        }
      }
    }
  };
  uint4* my0 = stage + warp * Shape::kSlots * 32 + lane;
  uint4* my1 = my0 + kSmallWarps * Shape::kSlots * 32;
  int t = blockIdx.x;
  Tile cur;
  bool have;
  moe_detail::WalkRec rn{};  // the next tile's record
  auto rec = [&](int tt) { return moe_detail::walk_rec_load(p, tt, tiles_x, total, g); };
  // Slot records settled (pdl.cuh): the first tile's weights before the wait.
  if (p.slots_settled) {
    have = find(t, rec(t), cur);
    if (have) issue(cur, my0, true);
    if (have) rn = rec(t + gridDim.x);
    pdl_enter();
  } else {
    pdl_enter();
    have = find(t, rec(t), cur);
    if (have) issue(cur, my0, true);
    if (have) rn = rec(t + gridDim.x);
  }
  if (have) issue(cur, my0, false);
  cp_async_commit();
  int buf = 0;
  while (have) {
    int tn = t + gridDim.x;
    Tile nx;
    const bool hn = find(tn, rn, nx);
    uint4* my = buf ? my1 : my0;
    if (hn) {
      uint4* mn = buf ? my0 : my1;
      issue(nx, mn, true);
      issue(nx, mn, false);
    }
    cp_async_commit();
    if (hn) rn = rec(tn + gridDim.x);  // lands while this tile computes
    float swr[kUnroll][NT], sar[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = warp + u * kSmallWarps;
      const int64_t cc = c < kblocks ? c : 0;
#pragma unroll
      for (int q = 0; q < NT; ++q) swr[u][q] = __ldg(cur.srow[q] + cc);
      sar[u] = cur.sxr ? __ldg(cur.sxr + cc) : 0.0f;
    }
    cp_async_wait<1>();  // this tile's group (the next one's stays in flight)
    float acc[NT][4];
#pragma unroll
    for (int q = 0; q < NT; ++q)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[q][c] = 0.0f;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = warp + u * kSmallWarps;
      if (c >= kblocks) break;  // warp-uniform
      const uint4 a0 = my[((u * kRows + NT) * 2) * 32], a1 = my[((u * kRows + NT) * 2 + 1) * 32];
      const uint32_t qa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const uint32_t kNoRows[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const float sa = sar[u];
#pragma unroll
      for (int q = 0; q < NT; ++q) {
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        block_mma(part, &my[((u * kRows + q) * 2) * 32], qa, kNoRows);
        // mma rows g + 8 hold no token (<= 8 rows): acc[q][2..3] stay 0 and are never stored.
        const float sw = swr[u][q];
        acc[q][0] += part[0] * sa * sw;
        acc[q][1] += part[1] * sa * sw;
      }
    }
    __syncthreads();  // the previous tile's reduction has read red
#pragma unroll
    for (int q = 0; q < NT; ++q)
#pragma unroll
      for (int c = 0; c < 4; ++c) red[warp][q * 4 + c][lane] = acc[q][c];
    __syncthreads();
    small_m::store_tile<kSilu, kDown, NT, kSmallWarps>(red, p.out, N, cur.n0, cur.row0, cur.cnt);
    cur = nx;
    t = tn;
    have = hn;
    buf ^= 1;
  }
}

template <bool kSilu, bool kM16, int kUnroll, int kDown = 1, int kMinCtas = small_min_ctas<kSilu, kDown>()>
cudaError_t launch_small_variant(const MoeFp8GemmParams& p, cudaStream_t stream) {
  constexpr size_t kSmem = SmallShape<kSilu, kM16, kUnroll, kDown>::kSmem;
  auto kernel = moe_fp8_small_m_kernel<kSilu, kM16, kUnroll, kDown, kMinCtas>;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t attr = attrs.get(
      [&] { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)); });
  if (attr != cudaSuccess) return attr;
  MoeFp8GemmParams q = p;
  // Slot records cover min(experts, entries) = max_active slots.
  if (q.slots && !(q.max_active > 0 && q.max_active <= q.experts && (reinterpret_cast<uintptr_t>(q.slots) & 15) == 0))
    q.slots = nullptr;
  const int ey = q.slots ? q.max_active
                 : q.active && q.max_active > 0 && q.max_active < q.experts ? q.max_active
                                                                           : q.experts;
  const int64_t cols = 8 * kDown;
  const dim3 grid(static_cast<unsigned>((q.N + cols - 1) / cols), static_cast<unsigned>(ey));
  return launch_pdl(kernel, grid, kSmallWarps * 32, kSmem, stream, q);
}

// The two-stage walk (moe_fp8_small_m_pipe_kernel): as many CTAs as are resident at once, at most one a tile.
template <bool kSilu, int kDown>
cudaError_t launch_pipe(const MoeFp8GemmParams& p, cudaStream_t stream) {
  constexpr size_t kSmem = 2 * SmallShape<kSilu, false, 2, kDown>::kSmem;
  auto kernel = moe_fp8_small_m_pipe_kernel<kSilu, kDown>;
  static PerDevice<int> per_sm_of;
  const int per_sm = per_sm_of.get([&] { return resident_per_sm(kernel, kSmallWarps * 32, kSmem); });
  if (per_sm <= 0) return cudaErrorInvalidConfiguration;
  const int64_t tiles_x = (p.N + 8 * kDown - 1) / (8 * kDown), total = tiles_x * p.max_active;
  if (total > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t grid = std::min<int64_t>(total, static_cast<int64_t>(per_sm) * device_sm_count());
  return launch_pdl(kernel, dim3(static_cast<unsigned>(grid)), kSmallWarps * 32, kSmem, stream, p,
                    static_cast<int>(tiles_x), static_cast<int>(total));
}

// One-round shapes up to 8 rows an expert take the two-stage walk (down with at most two column tiles a CTA: four do
// not fit two stages at two CTAs per SM) unless DSERVE_MOE_FP8_PIPE=0.
bool pipe_enabled() {
  static const bool v = env_flag("DSERVE_MOE_FP8_PIPE", true);
  return v;
}

}  // namespace

// One load round per tile (K <= kSmallWarps x 2 blocks: not deep), at most 8 rows an expert (not m16), slot records.
bool moe_fp8_small_m_pipes(const MoeFp8GemmParams& p) {
  return (p.pipe > 0 || (p.pipe < 0 && pipe_enabled())) && p.max_rows_per_expert <= 8 &&
         p.K / 128 <= kSmallWarps * 2 && p.slots && p.max_active > 0 && p.max_active <= p.experts &&
         (reinterpret_cast<uintptr_t>(p.slots) & 15) == 0;
}

namespace {

template <bool kSilu, int kDown>
cudaError_t launch_small_tiles(const MoeFp8GemmParams& p, bool m16, bool deep, cudaStream_t stream) {
  if (moe_fp8_small_m_pipes(p)) return launch_pipe<kSilu, kDown < 2 ? kDown : 2>(p, stream);  // neither m16 nor deep
  if (m16) return launch_small_variant<kSilu, true, 2, kDown>(p, stream);
  // Rounds of four blocks when that staging fits two CTAs per SM, else of two.
  constexpr bool kDeep4 = SmallShape<kSilu, false, 4, kDown>::kSmem <= 100 * 1024;
  if (deep) return launch_small_variant<kSilu, false, kDeep4 ? 4 : 2, kDown>(p, stream);
  // The gated one-tile shape takes 102 registers, so two CTAs per SM where its shared memory (56 KB) allows four;
  // capped at 64 (76 bytes spilled) four fit. Past one token (V2-Lite gate|up at 8 tokens: ~8,000 CTAs, 32 waves
  // of two a SM) that wins, at one token (1,056 CTAs) it loses: H100, session 24, --quantization fp8 decode,
  // alternating, batch 8 5.17 / 5.20 vs 5.26 / 5.27 ms, batch 1 2.42 / 2.44 vs 2.35 / 2.37 ms.
  // DSERVE_MOE_FP8_GATE_OCC=0: the 102-register kernel at every size (A/B runs).
  if constexpr (kSilu && kDown == 1) {
    static const bool occ = env_flag("DSERVE_MOE_FP8_GATE_OCC", true);
    if (occ && p.max_rows_per_expert > 1) return launch_small_variant<kSilu, false, 2, kDown, 4>(p, stream);
  }
  return launch_small_variant<kSilu, false, 2, kDown>(p, stream);
}

// Column tiles per CTA (A/B runs): DSERVE_MOE_FP8_GATE_TILES=1|2 for gate|up + SiLU, DSERVE_MOE_FP8_DOWN_TILES=1|2|4
// for down. Defaults from MoeFp8Test.SmallMColumnTilesAgree's timings (H100, 2026-11-26, whole-sector loads):
// gate|up 1 (2 is 5-10% slower up to 8 rows); down 4 up to 8 rows per expert (V3 47.8 vs 54.9 us with 1 at one
// row), 2 at 9-16.
int env_tiles(const char* name, int fallback) {
  const int64_t v = env_int(name, fallback);
  return v == 1 || v == 2 || v == 4 ? static_cast<int>(v) : fallback;
}
int gate_tiles() {
  static const int v = env_tiles("DSERVE_MOE_FP8_GATE_TILES", 1);
  return v;
}
int down_tiles(bool m16) {
  static const int v = env_tiles("DSERVE_MOE_FP8_DOWN_TILES", 0);
  return v > 0 ? v : m16 ? 2 : 4;
}

// ---- larger batches: the pipelined tile ----------------------------------------------------------------------
// Weight rows are the mma's M side (16 per warp: 16 kW per block, twice that with the fused gate|up), tokens its
// N side (8 * NT per tile), 128-byte stages through a cp.async pipeline; the activations come quantized (q, sx).
constexpr int kBK = 128;  // bytes (= e4m3 values = one scale block) per row per stage
constexpr int kMaxTokenTiles = 16;  // token tiles launched per expert; more rows loop

// Byte offset of 16-byte chunk `ch` of row `r` in a [rows, 128-byte] tile, XOR-swizzled against bank conflicts.
__device__ __forceinline__ int swz(int r, int ch) { return r * kBK + ((ch ^ (r & 7)) << 4); }

template <int NT, bool kSilu, int kStages, int kW>
struct Tile {
  static constexpr int kBlockN = 16 * kW;
  static constexpr int kTokens = 8 * NT;
  static constexpr int kARows = kSilu ? 2 * kBlockN : kBlockN;
  static constexpr int kAStage = kARows * kBK;
  static constexpr int kBStage = kTokens * kBK;
  static constexpr size_t kSmem = static_cast<size_t>(kStages) * (kAStage + kBStage);
};

template <int NT, bool kSilu, int kStages, int kW>
__global__ void __launch_bounds__(32 * kW) moe_fp8_grouped_kernel(MoeFp8GemmParams p) {
  pdl_enter();
  using T = Tile<NT, kSilu, kStages, kW>;
  constexpr int kBlockN = T::kBlockN;
  constexpr int kHalves = kSilu ? 2 : 1;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  uint8_t* sA = smem_raw;
  uint8_t* sB = sA + kStages * T::kAStage;

  // Grid: x = token tile (fastest, so the CTAs sharing an expert's weight rows run together and the later ones
  // read them from L2), y = column block, z = active expert slot.
  int e = blockIdx.z;
  if (p.active) {
    if (e >= *p.num_active) return;
    e = p.active[e];
  }
  const int cnt = p.counts[e];
  if (static_cast<int>(blockIdx.x) * T::kTokens >= cnt) return;
  const int64_t row0 = p.offsets[e];
  const uint8_t* W = static_cast<const uint8_t*>(p.weights[e]);
  const float* S = p.scales[e];
  const uint8_t* Q = p.q;
  const int64_t N = p.N, K = p.K, kblocks = K / 128;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kBlockN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int k_tiles = static_cast<int>(kblocks);
  const float* sw_row[kHalves];
#pragma unroll
  for (int h = 0; h < kHalves; ++h) sw_row[h] = S + (((h ? N : 0) + n0) / 128) * kblocks;  // 64-row block: one scale row

  for (int mt = blockIdx.x; mt * T::kTokens < cnt; mt += gridDim.x) {
    const int t0 = mt * T::kTokens;
    auto load_stage = [&](int stage, int kt) {
      const int64_t k0 = static_cast<int64_t>(kt) * kBK;
      uint8_t* a = sA + stage * T::kAStage;
      for (int c = threadIdx.x; c < T::kARows * 8; c += 32 * kW) {
        const int r = c >> 3, ch = c & 7;
        const int rr = kSilu ? r % kBlockN : r;
        const int64_t n = (kSilu && r >= kBlockN ? N : 0) + n0 + rr;
        const bool ok = n0 + rr < N;
        cp_async16(a + swz(r, ch), ok ? W + n * K + k0 + ch * 16 : W, ok);
      }
      uint8_t* b = sB + stage * T::kBStage;
      for (int c = threadIdx.x; c < T::kTokens * 8; c += 32 * kW) {
        const int r = c >> 3, ch = c & 7;
        const bool ok = t0 + r < cnt;
        const int64_t prow = row0 + t0 + r;
        const int64_t xrow = ok && p.src_rows ? p.src_rows[prow] : prow;
        cp_async16(b + swz(r, ch), ok ? Q + xrow * K + k0 + ch * 16 : Q, ok);
      }
    };
    // This lane's accumulator tokens (columns 2 tq, 2 tq + 1 of each n8 tile) and their activation-scale rows.
    const int gid = lane >> 2, tq = lane & 3;
    const float* sx_row[NT][2];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int t = t0 + j * 8 + tq * 2 + i;
        const int64_t prow = row0 + t;
        sx_row[j][i] = t < cnt ? p.sx + (p.src_rows ? p.src_rows[prow] : prow) * kblocks : nullptr;
      }

    float acc[kHalves][NT][4];
#pragma unroll
    for (int h = 0; h < kHalves; ++h)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[h][j][i] = 0.0f;

#pragma unroll 1
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < k_tiles) load_stage(s, s);
      cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      const int stage = kt % kStages;
      const uint8_t* a = sA + stage * T::kAStage;
      const uint8_t* b = sB + stage * T::kBStage;
      float part[kHalves][NT][4];
#pragma unroll
      for (int h = 0; h < kHalves; ++h)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) part[h][j][i] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kBK / 32; ++ks) {
        uint32_t af[kHalves][4];
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
          const int r = h * kBlockN + warp * 16 + (lane & 15);
          ldmatrix_x4(af[h], a + swz(r, ks * 2 + (lane >> 4)));
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          uint32_t bfr[2];
          const int r = j * 8 + (lane & 7);
          ldmatrix_x2(bfr, b + swz(r, ks * 2 + ((lane >> 3) & 1)));
#pragma unroll
          for (int h = 0; h < kHalves; ++h) mma_e4m3(part[h][j], af[h][0], af[h][1], af[h][2], af[h][3], bfr[0], bfr[1]);
        }
      }
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        const float swv = __ldg(sw_row[h] + kt);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const float s0 = sx_row[j][0] ? __ldg(sx_row[j][0] + kt) * swv : 0.0f;
          const float s1 = sx_row[j][1] ? __ldg(sx_row[j][1] + kt) * swv : 0.0f;
          acc[h][j][0] += part[h][j][0] * s0;
          acc[h][j][1] += part[h][j][1] * s1;
          acc[h][j][2] += part[h][j][2] * s0;
          acc[h][j][3] += part[h][j][3] * s1;
        }
      }
      const int next = kt + kStages - 1;
      if (next < k_tiles) load_stage(next % kStages, next);
      cp_async_commit();
    }
    cp_async_wait<0>();
    __syncthreads();

    // Accumulator (m16n8): acc[.][j][0..1] = weight row gid, tokens 2 tq, 2 tq + 1; [2..3] = row gid + 8.
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t n = n0 + warp * 16 + gid + (i >= 2 ? 8 : 0);
        const int t = t0 + j * 8 + tq * 2 + (i & 1);
        if (n >= N || t >= cnt) continue;
        float v = acc[0][j][i];
        if (kSilu) v = v / (1.0f + expf(-v)) * acc[kHalves - 1][j][i];
        static_cast<bf16*>(p.out)[(row0 + t) * N + n] = __float2bfloat16(v);
      }
  }
}

template <int NT, bool kSilu, int kStages, int kW>
cudaError_t launch_tile(const MoeFp8GemmParams& p, cudaStream_t stream) {
  using T = Tile<NT, kSilu, kStages, kW>;
  auto kernel = moe_fp8_grouped_kernel<NT, kSilu, kStages, kW>;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t attr = attrs.get(
      [&] { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::kSmem)); });
  if (attr != cudaSuccess) return attr;
  const int64_t rows = p.rows_hint > 0 && p.rows_hint < p.max_rows_per_expert ? p.rows_hint : p.max_rows_per_expert;
  const int64_t tiles = (rows + T::kTokens - 1) / T::kTokens;
  const int ey = p.active && p.max_active > 0 && p.max_active < p.experts ? p.max_active : p.experts;
  const dim3 grid(static_cast<unsigned>(tiles < kMaxTokenTiles ? tiles : kMaxTokenTiles),
                  static_cast<unsigned>((p.N + T::kBlockN - 1) / T::kBlockN), static_cast<unsigned>(ey));
  return launch_pdl(kernel, grid, 32 * kW, T::kSmem, stream, p);
}

bool common_ok(const MoeFp8GemmParams& p) {
  return moe_fp8_gemm_supported(p.N, p.K, p.silu) && p.weights && p.scales && p.out && p.counts && p.offsets &&
         p.experts <= 65535 && (!p.active || p.num_active) && (reinterpret_cast<uintptr_t>(p.out) & 15) == 0;
}

}  // namespace

bool moe_fp8_gemm_supported(int64_t N, int64_t K, bool silu) {
  return N > 0 && K > 0 && K % 128 == 0 && N % (silu ? 128 : 64) == 0;
}


cudaError_t launch_moe_fp8_small_m(const MoeFp8GemmParams& p, cudaStream_t stream) {
  if (p.experts == 0 || p.max_rows_per_expert <= 0) return cudaSuccess;
  if (!common_ok(p) || !p.q || !p.sx || p.max_rows_per_expert > kMoeFp8SmallMMax ||
      (reinterpret_cast<uintptr_t>(p.q) & 15) != 0)
    return cudaErrorInvalidValue;
  const bool m16 = p.max_rows_per_expert > 8;
  // Blocks per warp: one round when they fit in two (V2-Lite's gate|up and down, V3's down), else rounds of
  // four at 8 rows (V3's gate|up, K = 7168: 56 blocks) when the staging stays within ~100 KB per CTA (two CTAs
  // per SM); 16 rows keep two (a round stages a third more rows).
  const bool deep = !m16 && (p.K / 128 + kSmallWarps - 1) / kSmallWarps > 2;
  const int tiles = p.col_tiles > 0 ? p.col_tiles : (p.silu ? gate_tiles() : down_tiles(m16));
  if (p.silu) {
    if (tiles >= 2) return launch_small_tiles<true, 2>(p, m16, deep, stream);
    return launch_small_tiles<true, 1>(p, m16, deep, stream);
  }
  if (tiles >= 4 && p.N % 32 == 0) return launch_small_tiles<false, 4>(p, m16, deep, stream);
  if (tiles >= 2) return launch_small_tiles<false, 2>(p, m16, deep, stream);
  return launch_small_tiles<false, 1>(p, m16, deep, stream);
}

cudaError_t launch_moe_fp8_grouped(const MoeFp8GemmParams& p, cudaStream_t stream) {
  if (p.experts == 0 || p.max_rows_per_expert <= 0) return cudaSuccess;
  if (!common_ok(p) || !p.q || !p.sx || (reinterpret_cast<uintptr_t>(p.q) & 15) != 0) return cudaErrorInvalidValue;
  static const int env_tile = moe_env_tile("DSERVE_MOE_FP8_TILE");
  int tile = p.tile > 0 ? p.tile : env_tile;
  // Default, from MoeFp8Test.GroupedTileShapesAgree (H100, 2026-11-26): 16 tokens x 128 weight rows while twice
  // the mean load is <= 32 rows (V2-Lite gate|up at 64 tokens 153 vs 192 us, down 80 vs 105; V3 down 1111 vs
  // 1506 us, 0.97 of the copy rate); past that 32 tokens, with 128 rows for down (V2-Lite 256 tokens: 108 vs
  // 114 us) and 64 for gate|up (128 rows take 184 registers there: one CTA per SM).
  if (tile == 0) tile = p.rows_hint > 0 && p.rows_hint <= 32 ? 2 : p.silu ? 5 : 3;
  // Stages: as many as keep two CTAs per SM (<= ~113 KB of shared memory each).
  if (p.max_rows_per_expert <= 8 || tile == 4)
    return p.silu ? launch_tile<1, true, 6, 4>(p, stream) : launch_tile<1, false, 8, 4>(p, stream);
  switch (tile) {
    case 1: return p.silu ? launch_tile<2, true, 6, 4>(p, stream) : launch_tile<2, false, 8, 4>(p, stream);
    case 2: return p.silu ? launch_tile<2, true, 3, 8>(p, stream) : launch_tile<2, false, 6, 8>(p, stream);
    case 3: return p.silu ? launch_tile<4, true, 3, 8>(p, stream) : launch_tile<4, false, 5, 8>(p, stream);
    default: return p.silu ? launch_tile<4, true, 4, 4>(p, stream) : launch_tile<4, false, 6, 4>(p, stream);
  }
}

}  // namespace ds::kernels
