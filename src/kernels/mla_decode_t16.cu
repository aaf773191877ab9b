// MLA absorbed decode for at most 16 query rows per block (one token of <= 16 heads: V2-Lite, V3 under TP 8),
// in transposed form so no tensor-core work is padding: S^T = K Q^T (wgmma M = the tile's 64 cache rows, N = the
// 16 query rows) and O^T += V^T P^T (M = 64 value columns per wgmma, V^T read from the same tile as an MN-major
// operand, N = 16). The wgmma kernel of mla_decode.cu puts the query rows on M (64, so 48 of 64 are padding at
// 16 heads) and spends ~4x the tensor time per tile, which bounds a block of few heads (batch 1, long context).
// Block = (16 rows, or 8 where the blocks fit one wave: mla_decode_t16_rows; split, sequence), two warpgroups, each
// owning a share of every cache tile: warpgroup 0 the value panels 0-3, warpgroup 1 the value panels 4-7 and the rope
// panel 8. Each loads its share with the tensor-memory accelerator (own mbarrier per buffer, two buffers), computes
// the part of S^T over its value panels and half of the rope panel (the same wgmma count for both: a
// warpgroup-dependent count serialises them), and the two parts meet in shared memory; both then hold the same S^T
// and run the same online softmax (fp32 adds commute, so their maxima agree bit for bit), write half of P^T each, and
// each accumulates O^T for its own 256 value columns. Same split plan, partial layout and combine kernel as
// mla_decode.cu; split partials are stored straight from the accumulators, or, where a sequence's 2 / 4 / 8 / 16
// splits fit as one thread-block cluster, merged by the cluster in distributed shared memory (no combine launch:
// batch 64 x 4K, 2 splits, 115 -> 107 us).
// Where the time goes at batch 1 x 32K (per-block timeline, BENCHMARKS.md, session 21): four 72 KB tiles per block
// land every ~3.2 us (the block's share of HBM), ~1.4 us of compute per tile, and the block's start (metadata, the
// previous combine, Q) and end (last tile, epilogue, combine) are latency chains.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdlib>

#include "core/env.h"
#include "kernels/block_reduce.cuh"
#include "kernels/per_device.h"
#include "kernels/kv_fp8.h"
#include "kernels/mla_decode.h"
#include "kernels/mla_merge.cuh"
#include "kernels/mla_trace.cuh"
#include "kernels/occupancy.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/wgmma.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kThreads = 256;
constexpr int kMaxRows = 16;                       // query rows per block (the wgmma N): 16, or 8 (T16Layout)
constexpr int kTile = 64;                          // cache rows per tile (the S^T wgmma M; the split plan's unit)
static_assert(kTile == kMlaSplitUnit, "tiles are the split plan's units");
constexpr int kPanels = kMlaHeadDim / 64;          // 9 panels of 64 columns per row
constexpr int kPanelBytes = kTile * 128;           // one panel of a tile: 64 rows x 128 bytes
constexpr int kTileBytes = kPanels * kPanelBytes;  // 72 KB
constexpr int kBoxRows = 32;                       // the cache tensor map's box: 64 columns x 32 rows
constexpr int kOStride = kMlaValueDim + 4;         // floats per row of the transposed O in shared memory
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kRescaleThreshold = 8.0f;  // log2 units: keep a stale column max until exceeded by this

// Shared memory of a block of kRows query rows (offsets from a 1024-aligned base: the 128-byte swizzle repeats every
// 1024 bytes), and the accumulator shape: m64nR, R / 2 floats a thread in R / 8 groups of four (kJ).
template <int kRows>
struct T16Layout {
  static_assert(kRows == 8 || kRows == 16, "the wgmma N: 8 or 16");
  static constexpr int kAcc = kRows / 2;
  static constexpr int kJ = kRows / 8;
  static constexpr int kQPanelBytes = kRows * 128;                // one panel of Q: kRows rows x 128 bytes
  static constexpr int kSmemKv = 0;                               // two tiles [9 panels][64 rows][128 B]
  static constexpr int kSmemQ = kSmemKv + 2 * kTileBytes;         // [9 panels][kRows][128 B]
  static constexpr int kSmemP = kSmemQ + kPanels * kQPanelBytes;  // P^T [kRows][64 positions] bf16, swizzled
  static constexpr int kSmemS = kSmemP + kRows * 128;             // float [2 wg][64 cache rows][kRows]: S^T parts
  static constexpr int kSmemRed = kSmemS + 2 * kTile * kRows * 4; // float [2 wg][4 warps][kRows]: column max / sum
  static constexpr int kSmemCol = kSmemRed + 2 * 4 * kRows * 4;   // float [2][kRows]: final column max, sum
  static constexpr int kSmemBar = kSmemCol + 2 * kRows * 4;       // uint64 [2 buffers][2 wg]
  static constexpr int kSmemBytes = kSmemBar + 4 * 8 + 1024;
  static_assert(kRows * kOStride * 4 <= kTileBytes, "the transposed O fits a tile buffer");
  static_assert(kSmemBytes <= 232448, "exceeds the 227 KB opt-in shared memory of sm_90");
};

#ifdef DS_MLA_TRACE
// Diagnostic timeline, compiled only with -DDS_MLA_TRACE (scripts/build_mla_trace.sh): thread 0 of each block writes one
// row: [0] sm | split << 16, [1] / [2] globaltimer at start / end, [3] clock64 at start, [4] after the PDL wait, [5]
// Q loaded, [6 + i] tile i landed, [14 + i] tile i's P V done (i < 8), [22] clock64 at the end, [23] tiles, [24]
// barriers initialised, [25] / [26] early tiles 0 / 1 issued, [27] / [28] / [29] tile 1's S^T done / exchanged / P^T
// written, [30] / [31] the cluster merge's first barrier passed / its columns stored, [32] / [33] the epilogue's
// column sums reduced in registers / across warps (split partials only).
constexpr int kTrSlots = 40, kTrRows = 8192;
__device__ unsigned long long g_tr[kTrRows * kTrSlots];
__device__ unsigned int g_tr_ticket;
#define DS_TR(slot, v)              \
  do {                              \
    if (tr_row) tr_row[slot] = (v); \
  } while (0)
#else
#define DS_TR(slot, v) \
  do {                 \
  } while (0)
#endif

// Byte offset of 16-byte chunk c (0..71) of row r in a [9 panels][rows][128 B] swizzled buffer.
__device__ __forceinline__ uint32_t swz(int panel_bytes, int r, int c) {
  return (c >> 3) * panel_bytes + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// early_tiles: how many of the first tiles may load before pdl_wait (1: the second one's loads go out after Q's).
// decode_only: one query token per sequence, sequence s's token is s (no dependent q_starts read at the start).
// kCluster > 1: launched in clusters of kCluster consecutive splits of a block column, which merge their partials
// through distributed shared memory (the epilogue below) into num_splits / kCluster partials, or into the output
// when one cluster holds every split.
// kRows: query rows a block, 16 or 8 (8: half the serial work a tile and half the epilogue's bytes, twice the
// blocks; no cluster merge).
template <int kCluster, int kRows>
__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_t16_kernel(const MlaDecodeParams p, const __grid_constant__ CUtensorMap tmap, int early_tiles,
                          bool decode_only) {
  static_assert(kCluster == 1 || kRows == 16, "the cluster merge takes 16 rows a block");
  using L = T16Layout<kRows>;
  constexpr int kAcc = L::kAcc, kJ = L::kJ;  // accumulator floats a thread; groups of four of them
  constexpr int kQPanelBytes = L::kQPanelBytes, kSmemKv = L::kSmemKv, kSmemQ = L::kSmemQ, kSmemP = L::kSmemP,
                kSmemS = L::kSmemS, kSmemRed = L::kSmemRed, kSmemCol = L::kSmemCol, kSmemBar = L::kSmemBar;
  // Before pdl_wait (the previous kernel may still run) this kernel reads only the step metadata (uploaded by the
  // host before the forward; no kernel writes it) and cache rows of positions before the sequence's first new
  // token (written by earlier steps; this step's kernels write only its new tokens' rows): the first early_tiles
  // tiles when they hold no new row, so their loads overlap the previous kernel's tail.
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_align1024(smem_raw);
  const uint32_t sbase = smem_u32(smem);
  float* s_part = reinterpret_cast<float*>(smem + kSmemS);
  float* red = reinterpret_cast<float*>(smem + kSmemRed);
  float* col_fin = reinterpret_cast<float*>(smem + kSmemCol);

  const int tid = threadIdx.x, wg = tid >> 7, lt = tid & 127, wq = lt >> 5, lane = tid & 31;
#ifdef DS_MLA_TRACE
  unsigned long long* tr_row = nullptr;
  if (tid == 0) {
    const unsigned t = atomicAdd(&g_tr_ticket, 1u);
    if (t < kTrRows) tr_row = g_tr + static_cast<size_t>(t) * kTrSlots;
  }
  DS_TR(0, mla_trace::smid() | (blockIdx.y << 16));
  DS_TR(1, mla_trace::gtimer());
  DS_TR(3, clock64());
#endif
  const int seq = blockIdx.z, split = blockIdx.y, H = p.num_heads;
  // Block columns: the sequence's flattened (token, head) pairs [16 x, 16 x + 16).
  const int q0 = decode_only ? seq : p.q_starts[seq];
  const int pairs = decode_only ? H : (p.q_starts[seq + 1] - q0) * H;
  const int row0 = static_cast<int>(blockIdx.x) * kRows;
  if (row0 >= pairs) return;  // block-uniform
  const int rows = min(kRows, pairs - row0);
  auto col_pos = [&](int c) { return c < rows ? p.positions[q0 + (row0 + c) / H] : -1; };
  const int kv_end = max(0, min(col_pos(rows - 1) + 1, p.seq_lens[seq]));  // positions grow within a sequence
  const int n_units = (kv_end + kTile - 1) / kTile;
  const MlaSplitUnits mine = mla_decode_split_units(n_units, p.num_splits, split);
  const int u_begin = mine.begin, n = mine.count;
  const int64_t TH = static_cast<int64_t>(p.num_tokens) * H;
  const int64_t pair0 = static_cast<int64_t>(q0) * H + row0;  // (token, head) index of block column 0
  if (kCluster <= 1 && n == 0 && p.num_splits > 1) {  // a split past this context's end: only its log-sum-exp
    pdl_enter();
    if (tid < rows) p.part_lse[split * TH + pair0 + tid] = -INFINITY;
    return;
  }

  // This thread's accumulator elements (m64n16: 8 floats, m64n8: 4): index 4 j + 2 h + e is M row 16 wq + lane / 4
  // + 8 h, N column 8 j + 2 (lane % 4) + e.
  const int rbase = 16 * wq + (lane >> 2);
  int cpos[kJ][2];  // causal end of each of this thread's columns (-1: padding column)
#pragma unroll
  for (int j = 0; j < kJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) cpos[j][e] = col_pos(8 * j + 2 * (lane & 3) + e);

  const int32_t* btab = p.block_table + static_cast<int64_t>(seq) * p.max_pages;
  const uint32_t bar_base = sbase + kSmemBar;
  // Warpgroup wg's share of tile u into buffer buf: panels [4 wg, 4 wg + 4) (+ the rope panel for wg 1), completing
  // on the warpgroup's mbarrier of the buffer. The tile sits inside one page (page_size % 64). Its second 32-row
  // half is not loaded when it lies wholly past the context's end (the loop below zeroes rows past the end): the
  // tile holding a decode step's new row, loaded after the wait, is often such a tile (36 KB instead of 72).
  const int my_panels = wg == 0 ? 4 : 5;
  auto tma_tile = [&](int u, int buf) {
    const int slot0 = btab[(u * kTile) / p.page_size] * p.page_size + (u * kTile) % p.page_size;
    const uint32_t dst = sbase + kSmemKv + buf * kTileBytes;
    const uint32_t bar = bar_base + (buf * 2 + wg) * 8;
    const int halves = kv_end - u * kTile > kBoxRows ? 2 : 1;
    mbar_expect_tx(bar, my_panels * halves * kBoxRows * 128);
    for (int k = 0; k < my_panels; ++k) {
      const int panel = 4 * wg + k;
      for (int half = 0; half < halves; ++half)
        tma_load_box(dst + panel * kPanelBytes + half * kBoxRows * 128, &tmap, panel * 64, slot0 + half * kBoxRows, bar);
    }
  };

  float o[4][kAcc];  // O^T: value columns 64 (4 wg + c) + row, query columns as above
#pragma unroll
  for (int c = 0; c < 4; ++c)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) o[c][i] = 0.0f;
  float m[kJ][2], l[kJ][2];  // running column max (log2 units, possibly stale by < threshold), this thread's sums
#pragma unroll
  for (int j = 0; j < kJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      m[j][e] = -INFINITY;
      l[j][e] = 0.0f;
    }
  const float sl2 = p.scale * kLog2e;

  const int first_new = p.positions[q0];  // tiles wholly before it were written by earlier steps
  auto early = [&](int k) { return k < early_tiles && k < n && (u_begin + k + 1) * kTile <= first_new; };
  if (n > 0) {
    if (tid == 0) {
      for (int b = 0; b < 4; ++b) mbar_init(bar_base + b * 8, 1);
      mbar_init_fence();
    }
    __syncthreads();
    DS_TR(24, clock64());
    if (lt == 0) {
      if (early(0)) tma_tile(u_begin, 0);
      DS_TR(25, clock64());
      if (early(1)) tma_tile(u_begin + 1, 1);
      DS_TR(26, clock64());
    }
  }
  pdl_enter();
  DS_TR(4, clock64());
  if (n > 0) {
    if (lt == 0 && !early(0)) tma_tile(u_begin, 0);
    // Q: the block's rows into [9 panels][16 rows][128 B]; padding rows zero-filled. Its loads go out before the
    // second tile's when that one was not issued early.
    {
      const __nv_bfloat16* qp = static_cast<const __nv_bfloat16*>(p.q);
      for (int idx = tid; idx < kRows * (kMlaHeadDim / 8); idx += kThreads) {
        const int r = idx / (kMlaHeadDim / 8), c = idx % (kMlaHeadDim / 8);
        const bool ok = r < rows;
        const __nv_bfloat16* src = ok ? qp + (pair0 + r) * kMlaHeadDim + c * 8 : qp;
        cp_async16(sbase + kSmemQ + swz(kQPanelBytes, r, c), src, ok);
      }
      cp_async_commit();
      if (lt == 0 && n > 1 && !early(1)) tma_tile(u_begin + 1, 1);
      cp_async_wait<0>();
      fence_proxy_async();
      __syncthreads();
    }
  }
  DS_TR(5, clock64());

  for (int i = 0; i < n; ++i) {
    const int buf = i & 1, u = u_begin + i;
    const uint32_t tile = sbase + kSmemKv + buf * kTileBytes;
    mbar_wait(bar_base + (buf * 2 + wg) * 8, (i >> 1) & 1);
    if (wg == 0) mbar_wait(bar_base + (buf * 2 + 1) * 8, (i >> 1) & 1);  // the rope panel comes with wg 1's share
    if (i < 8) DS_TR(6 + i, clock64());
    const int valid = kv_end - u * kTile;
    if (valid < kTile) {  // rows past the context end: zero (a masked, zero P times NaN is still NaN)
      uint8_t* base = smem + kSmemKv + buf * kTileBytes;
      const int chunks = my_panels * 8;
      for (int idx = lt; idx < (kTile - valid) * chunks; idx += 128) {
        const int r = valid + idx / chunks, c = 32 * wg + idx % chunks;
        *reinterpret_cast<uint4*>(base + swz(kPanelBytes, r, c)) = make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async();
      __syncthreads();  // block-uniform: both warpgroups read the rope panel
    }

    // S^T over this warpgroup's value panels and half of the rope panel (k-steps 2 wg, 2 wg + 1 of its four):
    // 18 k-steps each, one accumulator chain per value panel.
    float sc[4][kAcc];
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int panel = 4 * wg + k;
      const uint64_t da = opaque(make_desc(tile + panel * kPanelBytes, 16, 1024));
      const uint64_t db = opaque(make_desc(sbase + kSmemQ + panel * kQPanelBytes, 16, 1024));
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wgmma_m64nk16<0>(sc[k], da + ((kk * 32) >> 4), db + ((kk * 32) >> 4), kk > 0);
    }
    {
      const uint32_t off = 64 * wg;  // bytes: k-steps 2 wg, 2 wg + 1 of the rope panel
      const uint64_t da = opaque(make_desc(tile + 8 * kPanelBytes + off, 16, 1024));
      const uint64_t db = opaque(make_desc(sbase + kSmemQ + 8 * kQPanelBytes + off, 16, 1024));
      wgmma_m64nk16<0>(sc[0], da, db, 1);
      wgmma_m64nk16<0>(sc[1], da + 2, db + 2, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    if (i == 1) DS_TR(27, clock64());
#pragma unroll
    for (int k = 0; k < 4; ++k) fence_regs(sc[k]);
    float s[kAcc];
#pragma unroll
    for (int x = 0; x < kAcc; ++x) s[x] = (sc[0][x] + sc[1][x]) + (sc[2][x] + sc[3][x]);
    // Exchange the parts: both warpgroups end with the same sums.
    float* mine = s_part + wg * kTile * kRows;
    const float* other = s_part + (wg ^ 1) * kTile * kRows;
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<float2*>(mine + (rbase + 8 * h) * kRows + 8 * j + 2 * (lane & 3)) =
            make_float2(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]);
    __syncthreads();
    if (i == 1) DS_TR(28, clock64());
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 t = *reinterpret_cast<const float2*>(other + (rbase + 8 * h) * kRows + 8 * j + 2 * (lane & 3));
        s[4 * j + 2 * h] += t.x;
        s[4 * j + 2 * h + 1] += t.y;
      }

    // Masked online softmax per query column (max over the 64 cache rows: the thread's two, the eight lanes of
    // the same lane % 4, then the four warps).
    float cmax[kJ][2];
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float mx = -INFINITY;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int pos = u * kTile + rbase + 8 * h;
          float& x = s[4 * j + 2 * h + e];
          x = (pos < kv_end && pos <= cpos[j][e]) ? x * sl2 : -INFINITY;
          mx = fmaxf(mx, x);
        }
        cmax[j][e] = column_max(mx);
      }
    float* red_wg = red + wg * 4 * kRows;
    if (lane < 4) {
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) red_wg[wq * kRows + 8 * j + 2 * lane + e] = cmax[j][e];
    }
    named_barrier(1 + wg, 128);
    float alpha[kJ][2], base[kJ][2];
    bool any_up = false;
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = 8 * j + 2 * (lane & 3) + e;
        const float mx = fmaxf(fmaxf(red_wg[c], red_wg[kRows + c]), fmaxf(red_wg[2 * kRows + c], red_wg[3 * kRows + c]));
        alpha[j][e] = 1.0f;
        if (mx > m[j][e] + kRescaleThreshold) {
          alpha[j][e] = fast_exp2(m[j][e] - mx);  // 0 when m = -inf
          m[j][e] = mx;
          any_up = true;
        }
        l[j][e] *= alpha[j][e];
        base[j][e] = m[j][e] == -INFINITY ? 0.0f : m[j][e];
      }
    if (__any_sync(0xffffffffu, any_up)) {
#pragma unroll
      for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int x = 0; x < kAcc; ++x) o[c][x] *= alpha[x >> 2][x & 1];
    }
    // P^T [16 query rows][64 positions], K-major for the P V wgmma; warpgroup wg writes query rows [8 wg, +8).
    uint8_t* pt = smem + kSmemP;
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float pv = fast_exp2(s[4 * j + 2 * h + e] - base[j][e]);
          l[j][e] += pv;
          if (j == wg) {
            const int c = 8 * j + 2 * (lane & 3) + e, r = rbase + 8 * h;
            *reinterpret_cast<__nv_bfloat16*>(pt + c * 128 + (((r >> 3) ^ (c & 7)) << 4) + (r & 7) * 2) =
                __float2bfloat16_rn(pv);
          }
        }
    fence_proxy_async();
    __syncthreads();  // P^T complete (and both warpgroups done reading this tile's S^T parts)
    if (i == 1) DS_TR(29, clock64());

    // O^T += V^T P^T for this warpgroup's four value panels: four independent chains of four k-steps.
#pragma unroll
    for (int c = 0; c < 4; ++c) fence_regs(o[c]);
    wgmma_fence();
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const uint64_t da = opaque(make_desc(tile + (4 * wg + c) * kPanelBytes, kPanelBytes, 1024));
      const uint64_t db = opaque(make_desc(sbase + kSmemP, 16, 1024));
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64nk16<1>(o[c], da + ((kk * 16 * 128) >> 4), db + ((kk * 32) >> 4), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < 4; ++c) fence_regs(o[c]);
    if (i < 8) DS_TR(14 + i, clock64());
    // This warpgroup is done with its panels of `buf`: refill them with tile i + 2.
    if (i + 2 < n) {
      named_barrier(1 + wg, 128);
      if (lt == 0) tma_tile(u + 2, buf);
    }
  }

  // Column sums: the thread's part, the eight lanes, the four warps (both warpgroups hold the same sums).
#pragma unroll
  for (int j = 0; j < kJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) l[j][e] = column_sum(l[j][e]);
  // The block's column sums from the warps' parts (red is free: its last readers passed the P^T barrier): inv = 1 /
  // sum (0 for a column that attended nothing) for this thread's four columns, and store_lse(column, m + log2(sum)
  // or -inf) from the threads that hold columns 0-15 once each.
  auto column_totals = [&](auto& inv, auto&& store_lse) {
    if (wg == 0 && lane < 4) {
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) red[wq * kRows + 8 * j + 2 * lane + e] = l[j][e];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = 8 * j + 2 * (lane & 3) + e;
        const float sum = (red[c] + red[kRows + c]) + (red[2 * kRows + c] + red[3 * kRows + c]);
        inv[j][e] = sum > 0.0f ? 1.0f / sum : 0.0f;
        if (wg == 0 && wq == 0 && lane < 4) store_lse(c, sum > 0.0f ? m[j][e] + log2f(sum) : -INFINITY);
      }
  };
  if constexpr (kCluster > 1) {
    // In-cluster merge. Each CTA puts its normalised O [16 query rows][512] (fp32) into its free tile buffer and
    // its log2-sum-exps into col_fin; after a cluster barrier CTA `rank` merges value columns [rank, rank + 1) x
    // kSlice of every row over the cluster's CTAs (distributed shared-memory loads) and stores them: the output
    // when the cluster holds every split, else the cluster's partial (index split / kCluster). Splits past the
    // context's end take part with an empty partial (sum 0: log2-sum-exp -inf, weight 0).
    __syncthreads();  // both warpgroups done with the tiles (tile buffer 0 takes O)
    float* o_s = reinterpret_cast<float*>(smem + kSmemKv);
    float inv[kJ][2];
    column_totals(inv, [&](int c, float lse) { col_fin[c] = lse; });
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int x = 0; x < kAcc; ++x) {
        const int j = x >> 2, h = (x >> 1) & 1, e = x & 1;
        o_s[(8 * j + 2 * (lane & 3) + e) * kOStride + 64 * (4 * wg + c) + rbase + 8 * h] = o[c][x] * inv[j][e];
      }
    cluster_sync();
    DS_TR(30, clock64());
    constexpr int kSlice = kMlaValueDim / kCluster;  // value columns merged by one CTA
    constexpr int kItems = kRows * kSlice / 4;       // float4 of them
    constexpr int kPer = (kItems + kThreads - 1) / kThreads;  // float4 items per thread
    const uint32_t rank = cluster_ctarank();
    const int clusters = p.num_splits / kCluster, cl = split / kCluster;
    // Every item's loads first, then the weighted sums and the stores. H100 (session 22, dserve_mla_trace): the
    // merge takes ~1.3 us at 2 CTAs and ~2.5 us at 16, the same with all of it in one round of loads and with
    // this CTA's own part read locally; the barrier before it ~1.6 us (the slower CTA's arrival), the one after ~0.7.
    float lse[kPer][kCluster];
    float4 x[kPer][kCluster];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int idx = tid + k * kThreads;
      if (kItems % kThreads != 0 && idx >= kItems) break;
      const int r = idx / (kSlice / 4), col = static_cast<int>(rank) * kSlice + 4 * (idx % (kSlice / 4));
      const uint32_t lse_at = smem_u32(col_fin + r), o_at = smem_u32(o_s + r * kOStride + col);
#pragma unroll
      for (int q = 0; q < kCluster; ++q) {  // this CTA's own part from its shared memory (the network is slow)
        lse[k][q] = q == static_cast<int>(rank) ? col_fin[r] : ld_cluster_f32(cluster_map(lse_at, q));
        x[k][q] = q == static_cast<int>(rank) ? *reinterpret_cast<const float4*>(o_s + r * kOStride + col)
                                              : ld_cluster_f32x4(cluster_map(o_at, q));
      }
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int idx = tid + k * kThreads;
      if (kItems % kThreads != 0 && idx >= kItems) break;
      const int r = idx / (kSlice / 4), col = static_cast<int>(rank) * kSlice + 4 * (idx % (kSlice / 4));
      float mx, sum;
      const float4 a = weigh_splits(lse[k], x[k], &mx, &sum);
      if (r < rows) {
        const float w = sum > 0.0f ? 1.0f / sum : 0.0f;
        if (clusters == 1) {
          __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(p.out) + (pair0 + r) * kMlaValueDim + col;
          *reinterpret_cast<uint2*>(dst) = make_uint2(pack_bf16(a.x * w, a.y * w), pack_bf16(a.z * w, a.w * w));
        } else {
          *reinterpret_cast<float4*>(p.part_o + (cl * TH + pair0 + r) * kMlaValueDim + col) =
              make_float4(a.x * w, a.y * w, a.z * w, a.w * w);
          if (rank == 0 && idx % (kSlice / 4) == 0)
            p.part_lse[cl * TH + pair0 + r] = sum > 0.0f ? mx + log2f(sum) : -INFINITY;
        }
      }
    }
    DS_TR(31, clock64());
    cluster_sync();  // this CTA's O and log2-sum-exps stay until every CTA of the cluster has read them
    DS_TR(22, clock64());
    DS_TR(23, n);
    DS_TR(2, mla_trace::gtimer());
    return;
  }
  if (p.num_splits > 1) {
    // Split partials straight from the accumulators: each store instruction of a warp writes 8 consecutive value
    // columns of 4 query rows (four whole 32-byte sectors). Only the column sums cross warps.
    DS_TR(32, clock64());
    float inv[kJ][2];
    column_totals(inv, [&](int c, float lse) {
      if (c < rows) p.part_lse[split * TH + pair0 + c] = lse;
    });
    DS_TR(33, clock64());
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int x = 0; x < kAcc; ++x) {
        const int j = x >> 2, h = (x >> 1) & 1, e = x & 1, qc = 8 * j + 2 * (lane & 3) + e;
        if (qc < rows)
          p.part_o[(split * TH + pair0 + qc) * kMlaValueDim + 64 * (4 * wg + c) + rbase + 8 * h] = o[c][x] * inv[j][e];
      }
    DS_TR(22, clock64());
    DS_TR(23, n);
    DS_TR(2, mla_trace::gtimer());
    return;
  }
  __syncthreads();  // every warpgroup done with the tiles, P^T and the exchange arrays
  if (wg == 0 && lane < 4) {
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) red[wq * kRows + 8 * j + 2 * lane + e] = l[j][e];
  }
  if (wg == 0 && wq == 0 && lane < 4) {
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) col_fin[8 * j + 2 * lane + e] = m[j][e];
  }
  // O^T into shared memory as O [16 query rows][512] fp32 (tile buffer 0 is free now).
  float* o_s = reinterpret_cast<float*>(smem + kSmemKv);
#pragma unroll
  for (int c = 0; c < 4; ++c)
#pragma unroll
    for (int x = 0; x < kAcc; ++x) {
      const int j = x >> 2, h = (x >> 1) & 1, e = x & 1;
      o_s[(8 * j + 2 * (lane & 3) + e) * kOStride + 64 * (4 * wg + c) + rbase + 8 * h] = o[c][x];
    }
  __syncthreads();
  if (tid < kRows) {
    const float sum = red[tid] + red[kRows + tid] + red[2 * kRows + tid] + red[3 * kRows + tid];
    col_fin[kRows + tid] = sum;
  }
  __syncthreads();
  // Coalesced write-out: normalised O (bf16) or this split's normalised partial (fp32) and log2-sum-exp.
  constexpr int kVec = kMlaValueDim / 4;  // float4 per row
  for (int idx = tid; idx < rows * kVec; idx += kThreads) {
    const int c = idx / kVec, d = 4 * (idx % kVec);
    const float sum = col_fin[kRows + c];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const float4 v = *reinterpret_cast<const float4*>(o_s + c * kOStride + d);
    if (p.num_splits == 1) {
      __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(p.out) + (pair0 + c) * kMlaValueDim + d;
      *reinterpret_cast<uint2*>(dst) = make_uint2(pack_bf16(v.x * inv, v.y * inv), pack_bf16(v.z * inv, v.w * inv));
    } else {
      float* dst = p.part_o + (split * TH + pair0 + c) * kMlaValueDim + d;
      *reinterpret_cast<float4*>(dst) = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
    }
  }
  if (p.num_splits > 1 && tid < rows) {
    const float sum = col_fin[kRows + tid];
    p.part_lse[split * TH + pair0 + tid] = sum > 0.0f ? col_fin[tid] + log2f(sum) : -INFINITY;
  }
  DS_TR(22, clock64());
  DS_TR(23, n);
  DS_TR(2, mla_trace::gtimer());
}

}  // namespace

#ifdef DS_MLA_TRACE
int mla_t16_trace_read(unsigned long long* host, int rows) {
  return mla_trace::read(&g_tr_ticket, g_tr, kTrRows, kTrSlots, host, rows);
}
#endif

bool mla_decode_t16_supported(const MlaDecodeParams& p) {
  static const bool disabled = !env_flag("DSERVE_MLA_T16", true);
  return !disabled && p.topk == nullptr && p.cache_format == kKvBf16 && p.head_dim == kMlaHeadDim &&
         p.v_dim == kMlaValueDim && p.num_heads >= 1 && p.max_q_len >= 1 &&
         static_cast<int64_t>(p.max_q_len) * p.num_heads <= kMaxRows && p.page_size > 0 && p.page_size % kTile == 0;
}

namespace {

// Blocks of a launch along x: the (token, head) rows of a sequence in groups of `rows`.
int64_t t16_row_blocks(const MlaDecodeParams& p, int rows) {
  return (static_cast<int64_t>(p.max_q_len) * p.num_heads + rows - 1) / rows;
}

// The kernel instantiation's attributes (its shared memory; clusters of more than 8 CTAs), set once: the result.
template <int kC, int kR>
cudaError_t t16_attributes() {
  static PerDevice<cudaError_t> attrs;
  return attrs.get([] {
    cudaError_t r = cudaFuncSetAttribute(mla_decode_t16_kernel<kC, kR>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         T16Layout<kR>::kSmemBytes);
    if (r == cudaSuccess && kC > 8)
      r = cudaFuncSetAttribute(mla_decode_t16_kernel<kC, kR>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return r;
  });
}

// Clusters of kC CTAs of the kernel that fit on the device at once (its cluster occupancy, cached per size): a
// cluster launch of more runs in waves.
template <int kC>
int64_t t16_max_clusters() {
  static PerDevice<int64_t> max_clusters;
  return max_clusters.get([] {
    // A failed query means no clusters; its error is cleared so that no later check of the stream picks it up.
    if (t16_attributes<kC, 16>() != cudaSuccess) {
      cudaGetLastError();
      return int64_t{0};
    }
    return static_cast<int64_t>(active_clusters(mla_decode_t16_kernel<kC, 16>, dim3(kThreads),
                                                 T16Layout<16>::kSmemBytes, dim3(1, kC, 1)));
  });
}

}  // namespace

int mla_decode_t16_max_clusters(int size) {
  switch (size) {
    case 2: return static_cast<int>(t16_max_clusters<2>());
    case 4: return static_cast<int>(t16_max_clusters<4>());
    case 8: return static_cast<int>(t16_max_clusters<8>());
    case 16: return static_cast<int>(t16_max_clusters<16>());
    default: return 0;
  }
}

// p.t16_cluster when set (> 1: that size if it divides num_splits), else num_splits itself when it is 2, 4, 8 or
// 16 and the clusters all fit the device at once: the kernel then writes the output and no combine runs. A merge
// into fewer partials still followed by the combine measured slower (H100, dserve_mla_bench, session 22: batch
// 1 x 4K 11.1 vs 8.5 us with clusters of 16, batch 8 x 4K 23.7 vs 21.7 and 1 x 32K 22.6 vs 21.0 with clusters of
// 2; clusters of 4 or more CTAs of this size do not fit 128 at once), so it is left to tests. None when the
// partials are left for launch_mla_combine_vc (skip_combine) or DSERVE_MLA_CLUSTER=0.
int mla_decode_t16_cluster(const MlaDecodeParams& p) {
  static const bool off = !env_flag("DSERVE_MLA_CLUSTER", true);
  if (p.num_splits <= 1 || p.skip_combine || p.t16_cluster == 0 || p.t16_cluster == 1 || (off && p.t16_cluster < 0))
    return 1;
  if (p.t16_cluster > 1) {
    const int c = p.t16_cluster;
    return (c == 2 || c == 4 || c == 8 || c == 16) && p.num_splits % c == 0 ? c : 1;
  }
  const int c = p.num_splits;  // one cluster per (row block, sequence)
  return c <= 16 && (c & (c - 1)) == 0 && t16_row_blocks(p, 16) * p.num_seqs <= mla_decode_t16_max_clusters(c) ? c : 1;
}

// Query rows a block for a launch merging `cluster` splits a cluster: p.t16_rows when 8 or 16 (8 only without a
// cluster merge), else 8 where the blocks of 8 rows still fit the device in one wave, else 16. Twice the blocks, each
// with half the serial work a tile (S^T, softmax, P V at wgmma N = 8) and half the epilogue: H200, session 50,
// dserve_mla_bench 1 x 288 7.3 -> 6.0 us, 4 x 288 7.5 -> 6.3, 1 x 4K 8.5 -> 8.3; bench-one-batch V2-Lite bf16
// batch 1 +1.5-2.8%, FP8 +2.1-4.1%, batch 8 +0.3-1.0%. DSERVE_MLA_T8=0: always 16 (A/B runs).
int mla_decode_t16_rows(const MlaDecodeParams& p, int cluster) {
  static const bool t8 = env_flag("DSERVE_MLA_T8", true);
  if (cluster > 1) return 16;
  if (p.t16_rows == 8 || p.t16_rows == 16) return p.t16_rows;
  const int64_t blocks8 = t16_row_blocks(p, 8) * p.num_splits * p.num_seqs;
  return t8 && blocks8 <= device_sm_count() ? 8 : 16;
}

namespace {

template <int kC, int kR>
cudaError_t launch_t16(const MlaDecodeParams& p, const CUtensorMap& map, int early, bool decode_only,
                       cudaStream_t stream) {
  if (const cudaError_t e = t16_attributes<kC, kR>(); e != cudaSuccess) return e;
  const int64_t row_blocks = t16_row_blocks(p, kR);
  if (row_blocks > INT32_MAX) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(p.num_splits),
                  static_cast<unsigned>(p.num_seqs));
  return launch_pdl_cluster(mla_decode_t16_kernel<kC, kR>, grid, dim3(1, kC, 1), kThreads, T16Layout<kR>::kSmemBytes,
                            stream, p, map, early, decode_only);
}

}  // namespace

cudaError_t launch_mla_decode_t16(const MlaDecodeParams& p, const void* tensor_map, cudaStream_t stream,
                                  int* merged) {
  // Tiles loaded before the PDL wait: 1 by default. With two, the first tiles' 144 KB per block queue ahead of the
  // previous kernel's reads (the split combine's partials, lengthening the wait) and of this block's Q (H100,
  // dserve_mla_bench batch 1 x 32K: 23.4 us with 2, 21.4 with 1, 22.0 with 0; H200, session 50: 19.2 / 17.6-17.8 /
  // 18.0). DSERVE_MLA_T16_EARLY=0|1|2.
  static const int early = [] {
    const int64_t v = env_int("DSERVE_MLA_T16_EARLY", 1);
    return v >= 0 && v <= 2 ? static_cast<int>(v) : 1;
  }();
  // num_tokens == num_seqs with at most one token each: every sequence has exactly one.
  const bool decode_only = p.max_q_len == 1 && p.num_tokens == p.num_seqs;
  const CUtensorMap& map = *static_cast<const CUtensorMap*>(tensor_map);
  const int c = mla_decode_t16_cluster(p);
  *merged = c;
  switch (c) {
    case 16: return launch_t16<16, 16>(p, map, early, decode_only, stream);
    case 8: return launch_t16<8, 16>(p, map, early, decode_only, stream);
    case 4: return launch_t16<4, 16>(p, map, early, decode_only, stream);
    case 2: return launch_t16<2, 16>(p, map, early, decode_only, stream);
    default:
      return mla_decode_t16_rows(p, 1) == 8 ? launch_t16<1, 8>(p, map, early, decode_only, stream)
                                            : launch_t16<1, 16>(p, map, early, decode_only, stream);
  }
}

}  // namespace ds::kernels
