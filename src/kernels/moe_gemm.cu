// Grouped expert GEMM (moe_gemm.h) on mma.sync m16n8k16 (bf16 -> fp32). "Swap AB": the weight rows are the
// MMA's M side and the (few) tokens of an expert its N side, so a decode step with 1..8 rows per expert
// wastes no weight bandwidth: each block streams one 64-row (128 with the fused SiLU gate|up) weight panel
// through a cp.async pipeline exactly once per 8*NT tokens of its expert.
#include <algorithm>
#include <cstdlib>
#include <string>

#include <cuda_bf16.h>

#include "core/env.h"
#include "kernels/moe.h"
#include "kernels/per_device.h"
#include "kernels/moe_block.cuh"
#include "kernels/occupancy.h"
#include "kernels/moe_gemm.h"
#include "kernels/pdl.cuh"
#include "kernels/small_m_tile.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

using bf16 = __nv_bfloat16;

constexpr int kBK = 64;       // k per pipeline stage: one 128-byte row per weight row / token
constexpr int kMaxWarps = 4;  // output columns per block: 16 per warp (kW warps: 32 or 64 columns)
constexpr int kMaxTokenTiles = 16;  // blocks per (expert, column tile) splitting an expert's token tiles


// Element offset of 16-byte chunk `ch` of row `r` in a [rows, 64] bf16 tile, XOR-swizzled so the eight rows
// one ldmatrix reads hit eight different bank groups.
__device__ __forceinline__ int swz(int r, int ch) { return r * kBK + ((ch ^ (r & 7)) << 3); }

template <int NT, bool kSilu, int kStages, int kW>
struct Tile {
  static constexpr int kBlockN = 16 * kW;
  static constexpr int kTokens = 8 * NT;
  static constexpr int kARows = kSilu ? 2 * kBlockN : kBlockN;
  static constexpr int kAStage = kARows * kBK;  // elements
  static constexpr int kBStage = kTokens * kBK;
  static constexpr size_t kSmem = static_cast<size_t>(kStages) * (kAStage + kBStage) * sizeof(bf16);
};

template <int NT, bool kSilu, int kStages, int kW>
__global__ void __launch_bounds__(32 * kW) moe_grouped_gemm_kernel(MoeGroupedGemmParams p) {
  pdl_enter();
  using T = Tile<NT, kSilu, kStages, kW>;
  constexpr int kBlockN = T::kBlockN, kWarps = kW;
  constexpr int kHalves = kSilu ? 2 : 1;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* sA = reinterpret_cast<bf16*>(smem_raw);
  bf16* sB = sA + kStages * T::kAStage;

  // Grid: x = token tile (fastest, so the blocks sharing an expert's weight rows run together and the later ones
  // read them from L2), y = column block, z = active expert slot.
  int e = blockIdx.z;
  if (p.active) {
    if (e >= *p.num_active) return;
    e = p.active[e];
  }
  const int cnt = p.counts[e];
  if (static_cast<int>(blockIdx.x) * T::kTokens >= cnt) return;  // this expert has no tokens for this block
  const int64_t row0 = p.offsets[e];
  const bf16* W = static_cast<const bf16*>(p.weights[e]);
  const bf16* X = static_cast<const bf16*>(p.x);
  bf16* O = static_cast<bf16*>(p.out);
  const int64_t N = p.N, K = p.K;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kBlockN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int k_tiles = static_cast<int>((K + kBK - 1) / kBK);

  for (int mt = blockIdx.x; mt * T::kTokens < cnt; mt += gridDim.x) {
    const int t0 = mt * T::kTokens;
    auto load_stage = [&](int stage, int kt) {
      const int64_t k0 = static_cast<int64_t>(kt) * kBK;
      bf16* a = sA + stage * T::kAStage;
      for (int c = threadIdx.x; c < T::kARows * 8; c += 32 * kWarps) {
        const int r = c >> 3, ch = c & 7;
        const int rr = kSilu ? r % kBlockN : r;  // column of the output this weight row feeds
        const int64_t n = (kSilu && r >= kBlockN ? N : 0) + n0 + rr;
        const int64_t k = k0 + ch * 8;
        const bool ok = n0 + rr < N && k < K;
        cp_async16(a + swz(r, ch), ok ? W + n * K + k : W, ok);
      }
      bf16* b = sB + stage * T::kBStage;
      for (int c = threadIdx.x; c < T::kTokens * 8; c += 32 * kWarps) {
        const int r = c >> 3, ch = c & 7;
        const int64_t k = k0 + ch * 8;
        const bool ok = t0 + r < cnt && k < K;
        const int64_t prow = row0 + t0 + r;
        const int64_t xrow = ok && p.src_rows ? p.src_rows[prow] : prow;
        cp_async16(b + swz(r, ch), ok ? X + xrow * K + k : X, ok);
      }
    };

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
      const bf16* a = sA + stage * T::kAStage;
      const bf16* b = sB + stage * T::kBStage;
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks) {
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
          for (int h = 0; h < kHalves; ++h) mma_bf16(acc[h][j], af[h], bfr);
        }
      }
      const int next = kt + kStages - 1;
      if (next < k_tiles) load_stage(next % kStages, next);
      cp_async_commit();
    }
    cp_async_wait<0>();
    __syncthreads();  // the next token tile refills every stage

    // Accumulator (m16n8): acc[.][j][0..1] = weight row gid, tokens 2*tq, 2*tq+1; [2..3] = row gid + 8.
    const int gid = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t n = n0 + warp * 16 + gid + (i >= 2 ? 8 : 0);
        const int t = t0 + j * 8 + tq * 2 + (i & 1);
        if (n >= N || t >= cnt) continue;
        float v = acc[0][j][i];
        if (kSilu) v = v / (1.0f + expf(-v)) * acc[kHalves - 1][j][i];
        O[(row0 + t) * N + n] = __float2bfloat16(v);
      }
  }
}

// Decode path (at most 16 rows per expert): the weight stream of small_m_tile.cuh. CTA = 8 output columns of
// one active expert (their gate and up rows with the fused SiLU: two n8 tiles) x the expert's rows (the mma's
// M side, up to 16); its 8 warps split K in 32-deep chunks, each staging a round of chunks with cp.async, and
// reduce through shared memory. Many small CTAs keep far more bytes in flight per SM than the pipeline of one
// 64-row panel.
constexpr int kSmallWarps = 8;

constexpr int kSlotTableJ = 8;  // weight pointers a lane holds with slot records: experts lane + 32 j (<= 256)

template <bool kSilu, bool kM16, int kUnroll>
__global__ void __launch_bounds__(kSmallWarps * 32) moe_small_m_kernel(MoeGroupedGemmParams p) {
  constexpr int NT = kSilu ? 2 : 1;
  extern __shared__ uint4 stage[];
  __shared__ float red[kSmallWarps][NT * 4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  // With slot records, the expert weight table (never written by a forward) in registers before the wait.
  unsigned long long table[kSlotTableJ];
#pragma unroll
  for (int j = 0; j < kSlotTableJ; ++j)
    table[j] = p.slots && lane + 32 * j < p.experts ? reinterpret_cast<unsigned long long>(p.weights[lane + 32 * j]) : 0;
  moe_detail::BlockRows b;
  const bf16* W = nullptr;
  // One load round: the slot's header and source rows, then the weight pointer from the register table.
  auto read_slot = [&] {
    b = moe_detail::block_rows_from_slot<kM16>(p, g);
    // The pick by selects written out (as a ternary chain the compiler makes the table an indexed local array).
    unsigned long long mine = 0;
#pragma unroll
    for (int j = 0; j < kSlotTableJ; ++j)
      asm("{\n .reg .pred q;\n setp.eq.s32 q, %2, %3;\n selp.b64 %0, %1, %0, q;\n}\n"
          : "+l"(mine)
          : "l"(table[j]), "r"(b.e >> 5), "r"(j));
    W = reinterpret_cast<const bf16*>(__shfl_sync(0xffffffffu, mine, b.e & 31));
  };
  const int64_t N = p.N, K = p.K;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 8;
  const bool wok = n0 + g < N;
  const bf16* wrow[NT];
  bool wk[NT];  // both tiles (gate, up) feed the same output column
  auto set_weight_rows = [&] {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      wrow[t] = W + (wok ? (t == 1 ? N : 0) + n0 + g : 0) * K + tig * 8;
      wk[t] = wok;
    }
  };
  uint4* my = stage + warp * small_m::NkShape<NT, kM16, kUnroll>::kSlots * 32 + lane;
  // Slots written two launches back or more (slots_settled: the down GEMM): read before the wait, and the first
  // round of weights issued then too (pdl.cuh).
  const bool early = p.slots && p.slots_settled;
  if (early) {
    read_slot();
    if (b.cnt == 0) return;  // block-uniform
    set_weight_rows();
    small_m::issue_first_weights<NT, kUnroll>(wrow, wk, K, warp, kSmallWarps, my);
  }
  pdl_enter();
  if (!early) {
    if (p.slots) {
      read_slot();
    } else {
      if (!moe_detail::block_rows_from_lists<kM16>(p, g, &b)) return;
      if (b.cnt > 0) W = static_cast<const bf16*>(p.weights[b.e]);
    }
    if (b.cnt == 0) return;  // block-uniform
    set_weight_rows();
  }
  const int cnt = b.cnt;
  const int64_t row0 = b.row0, xr0 = b.xr0, xr1 = b.xr1;
  const bf16* X = static_cast<const bf16*>(p.x);
  const bool ok0 = g < cnt, ok1 = kM16 && g + 8 < cnt;
  const bf16* x0 = X + (ok0 ? xr0 : 0) * K + tig * 8;
  const bf16* x1 = X + (ok1 ? xr1 : 0) * K + tig * 8;

  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[t][c] = 0.0f;
  if (early)
    small_m::accumulate_rows<NT, kM16, kUnroll, true>(wrow, wk, x0, ok0, x1, ok1, K, warp, kSmallWarps, my, acc);
  else
    small_m::accumulate_rows<NT, kM16, kUnroll, false>(wrow, wk, x0, ok0, x1, ok1, K, warp, kSmallWarps, my, acc);
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[warp][t * 4 + c][lane] = acc[t][c];
  __syncthreads();
  small_m::store_tile<kSilu, 1, NT, kSmallWarps>(red, p.out, N, n0, row0, cnt);
}

template <bool kSilu, bool kM16, int kUnroll>
cudaError_t launch_small_m_variant(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  constexpr size_t kSmem =
      static_cast<size_t>(kSmallWarps) * small_m::NkShape<kSilu ? 2 : 1, kM16, kUnroll>::kSlots * 512;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t attr = attrs.get([] {
    return cudaFuncSetAttribute(moe_small_m_kernel<kSilu, kM16, kUnroll>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmem));
  });
  if (attr != cudaSuccess) return attr;
  MoeGroupedGemmParams q = p;
  // Slot records cover min(experts, entries) = max_active slots; the register table 256 experts.
  if (q.slots && !(q.max_active > 0 && q.max_active <= q.experts && q.experts <= 32 * kSlotTableJ &&
                   (reinterpret_cast<uintptr_t>(q.slots) & 15) == 0))
    q.slots = nullptr;
  const int ey = q.slots ? q.max_active
                 : q.active && q.max_active > 0 && q.max_active < q.experts ? q.max_active
                                                                           : q.experts;
  const dim3 grid(static_cast<unsigned>((q.N + 7) / 8), static_cast<unsigned>(ey));
  return launch_pdl(moe_small_m_kernel<kSilu, kM16, kUnroll>, grid, kSmallWarps * 32, kSmem, stream, q);
}

// The same tiles (up to 8 rows an expert, slot records) walked by a grid of resident CTAs, two an SM, in two
// stages of one load round each, as moe_fp8.cu's walk does for FP8: a CTA issues its next round's copies (its
// tile's next K round, or its next tile's first) before it multiplies the current one, so its share of the HBM
// stays busy through the slot read, the reduction and the store that end a tile; a launch of one-round CTAs turns
// over in waves instead (V2-Lite's routed down: 1,536 CTAs, ~4 an SM). Tile t = column tile t % tiles_x of slot
// t / tiles_x. Same arithmetic and order as the one-round kernel (every round's products in order, zero-filled
// chunks included; the same reduction): the same bits. The down product's default at one token where tiles are few
// (walk_by_default below); otherwise asked for (MoeGroupedGemmParams::walk, DSERVE_MOE_SMALL_WALK):
// H200, session 33 (s33d-f, V2-Lite bf16 decode, graphs): the down walk (=1) batch 1 2.02-2.06 vs 2.04-2.08 ms
// (within noise), batch 8 a tie once the walk stops at the first empty slot; gate|up too (=2) 2.16-2.20 (a loss).
// Alone (MoeGemmGpu.SmallMWalkMatchesOneRound, 20 graphed launches, 1 and 5 rows): V3's gate|up walk 121-143 vs
// 134-155 us (~10% faster), V3's down 64-69 vs 57-60 us and V2-Lite's down 11.3-12.1 vs 9.5-10.6 us (slower).
constexpr int kWalkTableExperts = 32 * kSlotTableJ;  // the slot path's bound (256)
constexpr int kWalkCtasPerSm = 2;                    // the walk's launch bound: two stages of 48 KB a CTA

// The default: the down product of a one-token step whose tiles number at most 8 per walking CTA (two an SM). There
// the walk spares the one-round launch its turnover in waves (V2-Lite: 1,536 CTAs, ~3 waves) at the cost of fewer
// bytes in flight per tile; with many tiles a CTA that cost wins. H200, bf16 decode: V2-Lite (6 tiles a walker)
// batch 1 2.01-2.06 ms against 2.04-2.08 over five device calls (s33d-f, s34a, s34c; batch 8 a tie or a loss, so
// not there); V3's shapes (4 MoE layers of 256 experts, 27 tiles a walker) 2.34 vs 2.27 ms (s34d), a loss.
bool walk_by_default(const MoeGroupedGemmParams& p) {
  const int64_t tiles = (p.N + 7) / 8 * p.max_active;
  return !p.silu && p.max_rows_per_expert == 1 &&
         tiles <= 8 * kWalkCtasPerSm * static_cast<int64_t>(device_sm_count());
}

template <bool kSilu, int kUnroll>
__global__ void __launch_bounds__(kSmallWarps * 32, kWalkCtasPerSm)
    moe_small_m_walk_kernel(MoeGroupedGemmParams p, int tiles_x, int total, int rounds) {
  constexpr int NT = kSilu ? 2 : 1;
  constexpr int kSlots = small_m::NkShape<NT, false, kUnroll>::kSlots;  // kUnroll * (NT + 1)
  extern __shared__ uint4 stage[];  // [2 stages][warps][kSlots][32 lanes]
  __shared__ float red[kSmallWarps][NT * 4][32];
  // The expert weight table (never written by a forward) before the wait.
  __shared__ const bf16* w_tab[kWalkTableExperts];
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) w_tab[e] = static_cast<const bf16*>(p.weights[e]);
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  const int64_t N = p.N, K = p.K, chunks = K / 32;
  const bf16* X = static_cast<const bf16*>(p.x);
  struct Tile {
    int cnt;
    int64_t row0, n0;
    const bf16* wrow[NT];  // this lane's row g of each weight tile at k = tig * 8
    bool wok[NT];
    const bf16* xrow;  // activation row g at k = tig * 8
    bool xok;
  };
  // Tile t, if its slot has rows (moe_detail::walk_tile_slot: false past the end or the last slot with rows).
  auto find = [&](int t, Tile& s) {
    int4 h;
    int64_t xr0;
    if (!moe_detail::walk_tile_slot(p, t, tiles_x, total, g, &h, &xr0)) return false;
    const bf16* W = w_tab[h.x];
    s.cnt = h.y;
    s.row0 = h.z;
    s.n0 = static_cast<int64_t>(t % tiles_x) * 8;
    const bool wok = s.n0 + g < N;
#pragma unroll
    for (int q = 0; q < NT; ++q) {
      s.wrow[q] = W + (wok ? (q == 1 ? N : 0) + s.n0 + g : 0) * K + tig * 8;
      s.wok[q] = wok;
    }
    s.xok = g < s.cnt;
    s.xrow = X + (s.xok ? xr0 : 0) * K + tig * 8;
    return true;
  };
  // Round r of tile s: its weight copies or its activation copies (accumulate_rows's slots and chunk order).
  auto issue = [&](const Tile& s, int r, uint4* my, bool weights) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = warp + (static_cast<int64_t>(r) * kUnroll + u) * kSmallWarps;
      if (weights) {
        small_m::copy_weights<NT>(s.wrow, s.wok, c, chunks, u, my);
      } else {
        const bool in = c < chunks;
        small_m::cp_async_ca(&my[(kUnroll * NT + u) * 32], s.xrow + (in ? c : 0) * 32, in && s.xok);
      }
    }
  };
  uint4* my0 = stage + warp * kSlots * 32 + lane;
  uint4* my1 = my0 + kSmallWarps * kSlots * 32;
  int t = blockIdx.x;
  Tile cur;
  bool have;
  // Slot records settled (pdl.cuh): the first tile's first weight round before the wait.
  if (p.slots_settled) {
    have = find(t, cur);
    if (have) issue(cur, 0, my0, true);
    pdl_enter();
  } else {
    pdl_enter();
    have = find(t, cur);
    if (have) issue(cur, 0, my0, true);
  }
  if (have) issue(cur, 0, my0, false);
  cp_async_commit();
  float acc[NT][4];
#pragma unroll
  for (int q = 0; q < NT; ++q)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[q][c] = 0.0f;
  int r = 0, buf = 0;
  while (have) {
    // The round after (cur, r): cur's next, or the next tile's first.
    const bool same = r + 1 < rounds;
    int tn = t + gridDim.x;
    Tile nx;
    const bool hn = same || find(tn, nx);
    uint4* my = buf ? my1 : my0;
    uint4* mn = buf ? my0 : my1;
    if (same) {  // two calls, not one on a selected reference (that puts both tiles in local memory)
      issue(cur, r + 1, mn, true);
      issue(cur, r + 1, mn, false);
    } else if (hn) {
      issue(nx, 0, mn, true);
      issue(nx, 0, mn, false);
    }
    cp_async_commit();
    cp_async_wait<1>();  // this round's group (the next one's stays in flight)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint4 xa = my[(kUnroll * NT + u) * 32];
#pragma unroll
      for (int q = 0; q < NT; ++q) {
        const uint4 wv = my[(u * NT + q) * 32];
        mma_bf16(acc[q], xa.x, 0u, xa.y, 0u, wv.x, wv.y);
        mma_bf16(acc[q], xa.z, 0u, xa.w, 0u, wv.z, wv.w);
      }
    }
    if (same) {
      ++r;
    } else {
      __syncthreads();  // the previous tile's reduction has read red
#pragma unroll
      for (int q = 0; q < NT; ++q)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          red[warp][q * 4 + c][lane] = acc[q][c];
          acc[q][c] = 0.0f;
        }
      __syncthreads();
      small_m::store_tile<kSilu, 1, NT, kSmallWarps>(red, p.out, N, cur.n0, cur.row0, cur.cnt);
      cur = nx;
      t = tn;
      r = 0;
      have = hn;
    }
    buf ^= 1;
  }
}

template <bool kSilu, int kUnroll>
cudaError_t launch_small_m_walk(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  constexpr size_t kSmem =
      2 * static_cast<size_t>(kSmallWarps) * small_m::NkShape<kSilu ? 2 : 1, false, kUnroll>::kSlots * 512;
  auto kernel = moe_small_m_walk_kernel<kSilu, kUnroll>;
  static PerDevice<int> per_sm_of;
  const int per_sm = per_sm_of.get([&] { return resident_per_sm(kernel, kSmallWarps * 32, kSmem); });
  if (per_sm <= 0) return cudaErrorInvalidConfiguration;
  const int64_t tiles_x = (p.N + 7) / 8, total = tiles_x * p.max_active;
  const int64_t per_round = static_cast<int64_t>(kSmallWarps) * kUnroll;
  const int64_t rounds = (p.K / 32 + per_round - 1) / per_round;
  if (total > INT32_MAX || rounds > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t grid = std::min<int64_t>(total, static_cast<int64_t>(per_sm) * device_sm_count());
  return launch_pdl(kernel, dim3(static_cast<unsigned>(grid)), kSmallWarps * 32, kSmem, stream, p,
                    static_cast<int>(tiles_x), static_cast<int>(total), static_cast<int>(rounds));
}

// Whether the walk takes p: asked for (p.walk, else DSERVE_MOE_SMALL_WALK read per launch: 0 off, 1 the down
// product, 2 down and gate|up; unset: walk_by_default), at most 8 rows an expert and valid slot records.
bool small_m_walks(const MoeGroupedGemmParams& p) {
  int want = p.walk >= 0 ? p.walk : static_cast<int>(env_int("DSERVE_MOE_SMALL_WALK", -1));
  if (want < 0) want = walk_by_default(p) ? 1 : 0;
  return (want >= 2 || (want == 1 && !p.silu)) && p.max_rows_per_expert <= 8 && p.slots && p.max_active > 0 &&
         p.max_active <= p.experts && p.experts <= kWalkTableExperts &&
         (reinterpret_cast<uintptr_t>(p.slots) & 15) == 0;
}

// Chunks per warp per round of the plain (down) product at M <= 8: the default 8, or the fewest of 4 / 6 that
// still cover K in one round (V2-Lite's expert down, K = 1408: 44 chunks, 6 per warp), so a CTA's staging
// area shrinks and more CTAs share an SM (each CTA is one load round: more of them keep more bytes in
// flight). DSERVE_MOE_SMALL_UNROLL=4|6|8 forces one (A/B runs).
int down_unroll(int64_t K) {
  static const int forced = static_cast<int>(env_int("DSERVE_MOE_SMALL_UNROLL", 0));
  if (forced == 4 || forced == 6 || forced == 8) return forced;
  const int64_t per_warp = (K / 32 + kSmallWarps - 1) / kSmallWarps;
  return per_warp <= 4 ? 4 : per_warp <= 6 ? 6 : 8;
}

cudaError_t launch_small_m(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  const bool m16 = p.max_rows_per_expert > 8;
  if (small_m_walks(p)) {
    // Down in one round where six chunks a warp cover K (V2-Lite), else rounds of four (48 KB stages either way:
    // two stages of eight would not fit two CTAs an SM).
    if (p.silu) return launch_small_m_walk<true, 4>(p, stream);
    return down_unroll(p.K) == 6 ? launch_small_m_walk<false, 6>(p, stream) : launch_small_m_walk<false, 4>(p, stream);
  }
  // gate|up in rounds of 4 chunks a warp (48 KB, four CTAs an SM). One round of 8 (96 KB, two an SM: V2-Lite's
  // K = 2048 whole) measured no gain at batch 1 and lost at batch 8 (session 32, s32a).
  if (p.silu)
    return m16 ? launch_small_m_variant<true, true, 4>(p, stream) : launch_small_m_variant<true, false, 4>(p, stream);
  if (m16) return launch_small_m_variant<false, true, 4>(p, stream);
  switch (down_unroll(p.K)) {
    case 4: return launch_small_m_variant<false, false, 4>(p, stream);
    case 6: return launch_small_m_variant<false, false, 6>(p, stream);
    default: return launch_small_m_variant<false, false, 8>(p, stream);
  }
}

template <int NT, bool kSilu, int kStages, int kW = kMaxWarps>
cudaError_t launch_tile(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  using T = Tile<NT, kSilu, kStages, kW>;
  constexpr int kBlockN = T::kBlockN;
  auto kernel = moe_grouped_gemm_kernel<NT, kSilu, kStages, kW>;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t attr = attrs.get(
      [&] { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::kSmem)); });
  if (attr != cudaSuccess) return attr;
  const int64_t rows = p.rows_hint > 0 && p.rows_hint < p.max_rows_per_expert ? p.rows_hint : p.max_rows_per_expert;
  const int64_t tiles = (rows + T::kTokens - 1) / T::kTokens;
  const int ey = p.active && p.max_active > 0 && p.max_active < p.experts ? p.max_active : p.experts;
  const dim3 grid(static_cast<unsigned>(tiles < kMaxTokenTiles ? tiles : kMaxTokenTiles),
                  static_cast<unsigned>((p.N + kBlockN - 1) / kBlockN), static_cast<unsigned>(ey));
  return launch_pdl(kernel, grid, 32 * kW, T::kSmem, stream, p);
}

}  // namespace

bool moe_grouped_gemm_supported(int64_t N, int64_t K) { return N > 0 && K > 0 && K % 8 == 0; }

int moe_env_tile(const char* name) {
  const int64_t v = env_int(name, 0);
  return v >= 1 && v <= 5 ? static_cast<int>(v) : 0;
}

cudaError_t launch_moe_grouped_gemm(const MoeGroupedGemmParams& p, cudaStream_t stream) {
  if (p.experts == 0 || p.max_rows_per_expert <= 0 || p.N == 0) return cudaSuccess;
  if (!moe_grouped_gemm_supported(p.N, p.K) || !p.weights || !p.x || !p.out || !p.counts || !p.offsets ||
      p.experts > 65535 || (p.N + 31) / 32 > 0x7fffffff || (p.active && !p.num_active) ||
      ((reinterpret_cast<uintptr_t>(p.x) | reinterpret_cast<uintptr_t>(p.out)) & 15) != 0)
    return cudaErrorInvalidValue;
  // Decode (a handful of tokens per expert): one n8 token tile and a deep pipeline (few blocks per SM, so each
  // keeps 80-90 KB of weights in flight: 5 of 6 stages x 16 KB gate|up, 7 of 8 x 8 KB down); larger batches
  // four token tiles.
  // The small-M weight stream (small_m_tile.cuh) for up to 16 rows per expert (K % 32 == 0: every DeepSeek
  // shape). DSERVE_MOE_SMALL_M=0 keeps the pipelined kernel below (A/B runs; read per launch, tests switch it).
  // V2-Lite bench-one-batch, graphs (scripts/device/ab.sh, 2026-11-24): batch 8 7.94 vs 8.44 ms; batch 1
  // 3.52 vs 3.57 ms in one run and 3.50 vs 3.36 in another (run-to-run noise at batch 1 is ~0.1 ms).
  const bool small_m = env_flag("DSERVE_MOE_SMALL_M", true);
  if (small_m && p.max_rows_per_expert <= 16 && p.K % 32 == 0) return launch_small_m(p, stream);
  if (p.max_rows_per_expert <= 8) {
    // Few active experts (1 token: top-k of them) give fewer than two waves of 64-column blocks: 32-column
    // blocks (2 warps) double the streams in flight. Measured on the H100 (scripts/device/moeexp.sh,
    // 2026-11-23): V2-Lite MoE layer at 1 token 58.8 -> 50.2 us, V3 274.5 -> 261.6 us; at 8 tokens no gain.
    // DSERVE_MOE_DECODE_WARPS=2|4 forces one (benchmarks).
    static const int forced = static_cast<int>(env_int("DSERVE_MOE_DECODE_WARPS", 0));
    const int sms = device_sm_count();
    const int64_t ey = p.active && p.max_active > 0 && p.max_active < p.experts ? p.max_active : p.experts;
    const bool narrow = forced == 2 || (forced != 4 && (p.N + 63) / 64 * ey < 2 * static_cast<int64_t>(sms));
    if (narrow)
      return p.silu ? launch_tile<1, true, 6, 2>(p, stream) : launch_tile<1, false, 8, 2>(p, stream);
    return p.silu ? launch_tile<1, true, 6>(p, stream) : launch_tile<1, false, 8>(p, stream);
  }
  // Past 8 rows per expert: the FP8 kernel's shapes (moe_fp8.h MoeFp8GemmParams::tile, the same numbering; the
  // byte layout of a stage is the same). Default from MoeGemmGpu.GroupedTileShapesAgree (H100, 2026-11-26): 16
  // tokens x 128 weight rows while twice the mean load is <= 32 rows (V2-Lite gate|up at 64 tokens 268 vs 286 us
  // with 32 x 64), else 32 x 128 (256 tokens: 275 vs 284 us; bf16 needs 66 registers there, two CTAs per SM).
  static const int env_tile = moe_env_tile("DSERVE_MOE_TILE");
  int tile = p.tile > 0 ? p.tile : env_tile;
  if (tile == 0) tile = p.rows_hint > 0 && p.rows_hint <= 32 ? 2 : 3;
  switch (tile) {
    case 1: return p.silu ? launch_tile<2, true, 6, 4>(p, stream) : launch_tile<2, false, 8, 4>(p, stream);
    case 2: return p.silu ? launch_tile<2, true, 3, 8>(p, stream) : launch_tile<2, false, 6, 8>(p, stream);
    case 3: return p.silu ? launch_tile<4, true, 3, 8>(p, stream) : launch_tile<4, false, 5, 8>(p, stream);
    case 4: return p.silu ? launch_tile<1, true, 6>(p, stream) : launch_tile<1, false, 8>(p, stream);
    default: return p.silu ? launch_tile<4, true, 4>(p, stream) : launch_tile<4, false, 6>(p, stream);
  }
}

}  // namespace ds::kernels
