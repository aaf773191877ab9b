// MLA absorbed-form attention kernels (see mla_decode.h). The tensor-core kernel: one block of two
// warpgroups per (sequence, 64 query rows, context split). The 64 rows are (token, head) pairs of one
// sequence, so every cache tile loaded into shared memory is shared by all of them (MQA); with 128 heads a
// token takes two blocks (O for 64 heads x 512 columns in fp32 already fills half the register file), which
// run side by side so the second reads each tile from L2. Per 64-row cache tile: S = Q K^T with wgmma
// (each warpgroup 32 of the 64 tile rows, K = 576), masked online softmax in fp32 with the row maxima
// exchanged between the warpgroups, P (bf16) through shared memory, then O += P V with wgmma (each
// warpgroup 256 of the 512 value columns; O stays in registers, 128 per thread).
// Cache tiles are double-buffered; each warpgroup refills the panels only it reads as soon as its own P V is
// done, before waiting for the next tile (two tiles in flight). Dense contexts whose pages hold whole tiles
// load with the tensor-memory accelerator (one thread per warpgroup issues 9 boxes per tile, completion on an
// mbarrier): 16-byte cp.async requests cannot keep enough bytes in flight per SM. Top-k lists (gathered
// rows) use cp.async. Splits write fp32 partials + log-sum-exp; a combine kernel merges them. Packed FP8 caches
// (kernels/kv_fp8.h): raw rows by cp.async into the second tile buffer, dequantised into the first (one tile in
// flight while one is computed).
#include <cuda.h>  // CUtensorMap (types only; the encoder comes through the runtime's driver entry point)
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/env.h"
#include "kernels/block_reduce.cuh"
#include "kernels/per_device.h"
#include "kernels/fp8_quant.cuh"
#include "kernels/kv_fp8.cuh"
#include "kernels/mla_decode.h"
#include "kernels/mla_merge.cuh"
#include "kernels/mla_trace.cuh"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/tensor_map.h"
#include "kernels/wgmma.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kThreads = 256;                     // two warpgroups
constexpr int kRows = 64;                         // query rows per block (the wgmma M)
constexpr int kTile = 64;                         // cache rows per tile
static_assert(kTile == kMlaSplitUnit, "tiles are the split plan's units");
constexpr int kPanels = kMlaHeadDim / 64;         // 9 panels of 64 columns (128 bytes) per row
constexpr int kPanelBytes = kTile * 128;          // one panel of a 64-row tile: 8 KB
constexpr int kTileBytes = kPanels * kPanelBytes;  // 72 KB
constexpr int kChunksPerRow = kMlaHeadDim / 8;    // 16-byte chunks per row: 72
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kRescaleThreshold = 8.0f;  // log2 units: keep a stale row max until exceeded by this

// Shared memory: Q tile, two cache tiles, P, and small per-row exchange arrays (1 KB alignment slack: the
// 128-byte swizzle pattern repeats every 1024 bytes and wgmma descriptors assume that alignment).
constexpr int kSmemQ = 0;
constexpr int kSmemKv = kTileBytes;
constexpr int kSmemP = 3 * kTileBytes;
constexpr int kSmemTilePos = kSmemP + kRows * 128;  // int [2][64]: context position of each tile row or -1
constexpr int kSmemRedMax = kSmemTilePos + 2 * kTile * 4;  // float [2][64]
constexpr int kSmemRedSum = kSmemRedMax + 2 * kRows * 4;   // float [2][64]
constexpr int kSmemBar = kSmemRedSum + 2 * kRows * 4;     // uint64 [2 buffers][2 warpgroups] mbarriers
constexpr int kSmemBytes = kSmemBar + 4 * 8 + 1024;
constexpr int kTmaBoxRows = 32;  // TMA box: 64 columns (one 128-byte panel row) x 32 rows = 4 KB
static_assert(kSmemBytes <= 232448, "exceeds the 227 KB opt-in shared memory of sm_90");

// Byte offset of 16-byte chunk `c` (0..71) of row `r` in a [9 panels][64 rows][128 B] tile with the 128-byte
// swizzle (chunk index XOR row % 8), the layout wgmma reads for both K-major and MN-major operands.
__device__ __forceinline__ uint32_t tile_offset(int r, int c) {
  return (c >> 3) * kPanelBytes + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// Packed FP8 rows (kFormat != kKvBf16, kernels/kv_fp8.h): the tile is loaded by cp.async into the second tile
// buffer as raw rows (42 KB fit its 72 KB) and dequantised into the first one, which Q K^T and P V then read as
// bf16: one tile in flight while one is computed.
template <int kFormat>
__device__ __forceinline__ void dequant_tile(const uint8_t* stage, uint8_t* tile, int tid) {
  constexpr KvRowLayout L = kv_row_layout(kFormat, kMlaValueDim, kMlaHeadDim - kMlaValueDim);
  constexpr __nv_fp8_interpretation_t kKind = kFormat == kKvE4M3 ? __NV_E4M3 : __NV_E5M2;
  const int r = tid >> 2, part = tid & 3;  // four threads per row, 16-byte chunks (8 values) part, part + 4, ...
  const uint8_t* src = stage + r * L.row_bytes;
#pragma unroll
  for (int j = 0; j < kChunksPerRow / 4; ++j) {
    const int c = part + 4 * j;
    uint4 out;
    if (kFormat == kKvE4M3 && c >= kMlaValueDim / 8) {  // the bf16 rope part as it is
      out = *reinterpret_cast<const uint4*>(src + L.rope_off + 16 * (c - kMlaValueDim / 8));
    } else {
      const uint2 raw = *reinterpret_cast<const uint2*>(src + 8 * c);
      const float scale = kFormat == kKvE4M3 ? reinterpret_cast<const float*>(src + L.scale_off)[c / 16] : 1.0f;
      const uint2 lo = fp8x4_to_bf16x4<kKind>(raw.x, scale), hi = fp8x4_to_bf16x4<kKind>(raw.y, scale);
      out = make_uint4(lo.x, lo.y, hi.x, hi.y);
    }
    *reinterpret_cast<uint4*>(tile + tile_offset(r, c)) = out;
  }
}

// kTma: dense context with page_size % 64 == 0 (each tile is 64 consecutive slots of one page), loaded by
// the tensor map `tmap` over the cache; otherwise per-row cp.async (tmap unused). kFormat: the cache rows
// (packed formats: no tensor map; see dequant_tile; with top-k lists (V3.2 on an FP8 cache) the gathered rows are
// dequantised like dense ones).
template <bool kTopk, bool kTma, int kFormat = kKvBf16>
__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_kernel(const MlaDecodeParams p, const __grid_constant__ CUtensorMap tmap) {
  pdl_enter();
  static_assert(!(kTopk && kTma), "top-k rows are gathered: no tensor-map path");
  constexpr bool kPacked = kFormat != kKvBf16;
  static_assert(!(kPacked && kTma), "packed rows: by cp.async only");
  constexpr int kPackedRow = kv_row_layout(kFormat, kMlaValueDim, kMlaHeadDim - kMlaValueDim).row_bytes;
  static_assert(kPackedRow % 16 == 0 && kTile * kPackedRow <= kTileBytes, "a packed tile fits a tile buffer");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_align1024(smem_raw);
  const uint32_t sbase = smem_u32(smem);
  int* tile_pos = reinterpret_cast<int*>(smem + kSmemTilePos);
  float* red_max = reinterpret_cast<float*>(smem + kSmemRedMax);
  float* red_sum = reinterpret_cast<float*>(smem + kSmemRedSum);

  const int tid = threadIdx.x;
  const int wg = tid >> 7;   // Q K^T on tile rows [32 wg, 32 wg + 32); P V on value columns [256 wg, +256)
  const int lt = tid & 127;  // thread within the warpgroup
  const int lane = tid & 31;
  const int wq = lt >> 5;  // warp within the warpgroup: accumulator rows [16 wq, 16 wq + 16)
  const int seq = blockIdx.z;
  const int split = blockIdx.y;
  const int H = p.num_heads;
  const int q0 = p.q_starts[seq];
  const int qn = p.q_starts[seq + 1] - q0;
  const int seq_len = p.seq_lens[seq];
  const int head_chunks = (H + kRows - 1) / kRows;

  // Block row r -> (token, head). Without top-k the rows run over the sequence's flattened (token, head)
  // pairs (several tokens per block when H < 64: they share every cache tile); with top-k each token has its
  // own context rows, so a block holds heads of one token.
  auto row_of = [&](int r, int* t, int* h) -> bool {
    if (kTopk) {
      const int tq = static_cast<int>(blockIdx.x) / head_chunks;
      *h = (static_cast<int>(blockIdx.x) % head_chunks) * kRows + r;
      *t = q0 + tq;
      return tq < qn && *h < H;
    }
    const int g = static_cast<int>(blockIdx.x) * kRows + r;
    *t = q0 + g / H;
    *h = g % H;
    return g < qn * H;
  };
  int t_first, h_first;
  if (!row_of(0, &t_first, &h_first)) return;  // block-uniform: no rows here
  // Causal end of the block's context: rows are in token order and positions grow within a sequence.
  int kv_end;
  if (kTopk) {
    kv_end = min(p.positions[t_first] + 1, seq_len);
  } else {
    const int g_last = min(static_cast<int>(blockIdx.x) * kRows + kRows - 1, qn * H - 1);
    kv_end = min(p.positions[q0 + g_last / H] + 1, seq_len);
  }
  // This split's tiles (units of 64 context positions, or of 64 top-k entries).
  const int n_units = kTopk ? (p.topk_k + kTile - 1) / kTile : (max(kv_end, 0) + kTile - 1) / kTile;
  const MlaSplitUnits mine = mla_decode_split_units(n_units, p.num_splits, split);
  const int u_begin = mine.begin, n = mine.count;
  // A split past this context's end (the plan is made for the longest context the step may see): nothing
  // attended. Only its log-sum-exp is written; the combine reads no O of such splits.
  if (n == 0 && p.num_splits > 1) {
    const int64_t TH = static_cast<int64_t>(p.num_tokens) * H;
    int t, h;
    if (tid < kRows && row_of(tid, &t, &h)) p.part_lse[split * TH + static_cast<int64_t>(t) * H + h] = -INFINITY;
    return;
  }

  const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;  // the two accumulator rows of this thread
  int pos0, pos1;  // query positions; -1: padding row, every column masked
  {
    int t, h;
    pos0 = row_of(r0, &t, &h) ? p.positions[t] : -1;
    pos1 = row_of(r1, &t, &h) ? p.positions[t] : -1;
  }

  const __nv_bfloat16* cache = static_cast<const __nv_bfloat16*>(p.cache);
  const int32_t* btab = p.block_table + static_cast<int64_t>(seq) * p.max_pages;
  const int32_t* tk = kTopk ? p.topk + static_cast<int64_t>(t_first) * p.topk_k : nullptr;

  // Context position held by row r of tile u, or -1 (beyond the block's context, or a -1 top-k entry).
  auto row_pos = [&](int u, int r) -> int {
    if (kTopk) {
      const int e = u * kTile + r;
      const int pos = e < p.topk_k ? tk[e] : -1;
      return (pos >= 0 && pos < kv_end) ? pos : -1;
    }
    const int pos = u * kTile + r;
    return pos < kv_end ? pos : -1;
  };
  auto row_src = [&](int pos) -> const __nv_bfloat16* {
    if (pos < 0) return cache;  // zero-filled; the address is not read
    const int64_t slot = static_cast<int64_t>(btab[pos / p.page_size]) * p.page_size + pos % p.page_size;
    return cache + slot * kMlaHeadDim;
  };
  // This warpgroup's share of tile u: the value panels [4 wg, 4 wg + 4) of all 64 rows (only its P V reads
  // them) and the rope panel of rows [32 wg, 32 wg + 32) (only its Q K^T reads those). Rows outside the
  // context are zero-filled so that masked columns never multiply stale or NaN cache contents.
  auto load_tile = [&](int u, int buf) {
    const uint32_t dst = sbase + kSmemKv + buf * kTileBytes;
    const int ra = lt >> 1;
    const int pa = row_pos(u, ra);
    const __nv_bfloat16* src_a = row_src(pa);
#pragma unroll
    for (int m = 0; m < 16; ++m) {
      const int c = wg * 32 + 2 * m + (lt & 1);  // two threads per row: 32 contiguous bytes per step
      cp_async16(dst + tile_offset(ra, c), src_a + c * 8, pa >= 0);
    }
    const int rb = wg * 32 + (lt >> 2);
    const int pb = row_pos(u, rb);
    const __nv_bfloat16* src_b = row_src(pb);
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      const int c = 64 + (lt & 3) * 2 + m;
      cp_async16(dst + tile_offset(rb, c), src_b + c * 8, pb >= 0);
    }
    if (kTopk && wg == 0 && (lt & 1) == 0) tile_pos[buf * kTile + ra] = pa;
  };
  // Packed path: raw rows of tile u into the second buffer (four threads per row, 16-byte chunks); with top-k
  // lists the rows' positions into tile_pos slot `slot` (the bf16 tile is always buffer 0 here, so the positions
  // alternate between the two slots: tile i + 1's are written while tile i's are still to be read).
  auto load_packed = [&](int u, int slot) {
    const int r = tid >> 2, part = tid & 3;
    const int pos = row_pos(u, r);
    if (kTopk && part == 0) tile_pos[slot * kTile + r] = pos;
    const uint8_t* src = static_cast<const uint8_t*>(p.cache);
    if (pos >= 0)
      src += (static_cast<int64_t>(btab[pos / p.page_size]) * p.page_size + pos % p.page_size) * kPackedRow;
    uint8_t* dst = smem + kSmemKv + kTileBytes + r * kPackedRow;
#pragma unroll
    for (int j = 0; j < (kPackedRow / 16 + 3) / 4; ++j) {
      const int c = part + 4 * j;
      if (c < kPackedRow / 16) cp_async16(dst + 16 * c, src + 16 * c, pos >= 0);
    }
  };
  // TMA path: the elected thread of each warpgroup loads the same share as load_tile (value panels
  // [4 wg, 4 wg + 4), rope panel rows [32 wg, 32 wg + 32)), 9 boxes of 4 KB, all completing on the
  // warpgroup's mbarrier of the buffer. `slot0`: cache slot of the tile's first row.
  const uint32_t bar_base = sbase + kSmemBar;
  auto tma_tile = [&](int slot0, int buf) {
    const uint32_t dst = sbase + kSmemKv + buf * kTileBytes;
    const uint32_t bar = bar_base + (buf * 2 + wg) * 8;
    mbar_expect_tx(bar, 9 * kTmaBoxRows * 128);
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        tma_load_box(dst + (4 * wg + k) * kPanelBytes + half * kTmaBoxRows * 128, &tmap, (4 * wg + k) * 64,
                     slot0 + half * kTmaBoxRows, bar);
    tma_load_box(dst + 8 * kPanelBytes + wg * kTmaBoxRows * 128, &tmap, 512, slot0 + wg * kTmaBoxRows, bar);
  };
  auto tile_slot0 = [&](int page_entry, int u) {  // page_size % 64 == 0: the tile sits inside one page
    return page_entry * p.page_size + (u * kTile) % p.page_size;
  };
  auto page_entry_of = [&](int u) { return u < n_units ? btab[(u * kTile) / p.page_size] : 0; };
  // Waits until tile `i` of this split (buffer i & 1) is complete, zeroes its rows past the context end (a
  // whole page was loaded; its tail may hold stale or NaN data that a masked, zero P would still turn into
  // NaN), and publishes it to both warpgroups' wgmma.
  auto wait_tile_tma = [&](int i) {
    const int buf = i & 1;
    const uint32_t parity = (i >> 1) & 1;
    mbar_wait(bar_base + (buf * 2 + 0) * 8, parity);
    mbar_wait(bar_base + (buf * 2 + 1) * 8, parity);
    const int valid = kv_end - (u_begin + i) * kTile;
    if (valid < kTile) {
      uint8_t* base = smem + kSmemKv + buf * kTileBytes;
      for (int idx = tid; idx < (kTile - valid) * kChunksPerRow; idx += kThreads) {
        const int r = valid + idx / kChunksPerRow, c = idx % kChunksPerRow;
        *reinterpret_cast<uint4*>(base + tile_offset(r, c)) = make_uint4(0, 0, 0, 0);
      }
    }
  };

  float o[128];  // O rows r0 / r1, value columns 256 wg + 8 j + 2 (lane % 4) + {0, 1}
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  float s[16];  // S rows r0 / r1, tile columns 32 wg + 8 j + 2 (lane % 4) + {0, 1}
  float m0 = -INFINITY, m1 = -INFINITY;  // running row max (log2 units, possibly stale by < threshold)
  float l0 = 0.0f, l1 = 0.0f;            // this thread's part of the row sums
  const float sl2 = p.scale * kLog2e;

  auto issue_qk = [&](int buf) {
    const uint64_t dq = opaque(make_desc(sbase + kSmemQ, 16, 1024));
    const uint64_t dk = opaque(make_desc(sbase + kSmemKv + buf * kTileBytes + wg * 32 * 128, 16, 1024));
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kMlaHeadDim / 16; ++k) {
      const uint32_t off = ((k >> 2) * kPanelBytes + (k & 3) * 32) >> 4;  // in the address field's units
      wgmma_bf16_ss<0>(s, dq + off, dk + off, k > 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int buf) {
    const uint64_t dp = opaque(make_desc(sbase + kSmemP, 16, 1024));
    const uint64_t dv = opaque(make_desc(sbase + kSmemKv + buf * kTileBytes + wg * 4 * kPanelBytes, kPanelBytes, 1024));
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kTile / 16; ++k) wgmma_bf16_ss<1>(o, dp + ((k * 32) >> 4), dv + ((k * 16 * 128) >> 4), 1);
    wgmma_commit();
  };
  // Masked online softmax of S (tile in `buf`); writes P to shared memory. Two block barriers: the row-max
  // exchange between the warpgroups, and P complete before either warpgroup's P V reads it.
  auto softmax = [&](int buf, int u, int pos_slot) {
    const int* tp = tile_pos + pos_slot * kTile + wg * 32;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        int pos;
        if (kTopk) {
          pos = tp[8 * j + 2 * (lane & 3) + e];
        } else {
          pos = u * kTile + wg * 32 + 8 * j + 2 * (lane & 3) + e;
          if (pos >= kv_end) pos = -1;
        }
        s[4 * j + e] = (pos >= 0 && pos <= pos0) ? s[4 * j + e] * sl2 : -INFINITY;
        s[4 * j + 2 + e] = (pos >= 0 && pos <= pos1) ? s[4 * j + 2 + e] * sl2 : -INFINITY;
        mx0 = fmaxf(mx0, s[4 * j + e]);
        mx1 = fmaxf(mx1, s[4 * j + 2 + e]);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    if ((lane & 3) == 0) {
      red_max[wg * kRows + r0] = mx0;
      red_max[wg * kRows + r1] = mx1;
    }
    __syncthreads();
    mx0 = fmaxf(mx0, red_max[(wg ^ 1) * kRows + r0]);
    mx1 = fmaxf(mx1, red_max[(wg ^ 1) * kRows + r1]);
    // Both warpgroups see the same maxima, so they take the same rescale decisions.
    const bool up0 = mx0 > m0 + kRescaleThreshold, up1 = mx1 > m1 + kRescaleThreshold;
    float a0 = 1.0f, a1 = 1.0f;
    if (up0) {
      a0 = fast_exp2(m0 - mx0);  // 0 when m0 = -inf
      m0 = mx0;
    }
    if (up1) {
      a1 = fast_exp2(m1 - mx1);
      m1 = mx1;
    }
    if (__any_sync(0xffffffffu, up0 || up1)) {
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        o[4 * j] *= a0;
        o[4 * j + 1] *= a0;
        o[4 * j + 2] *= a1;
        o[4 * j + 3] *= a1;
      }
    }
    l0 *= a0;
    l1 *= a1;
    const float b0 = m0 == -INFINITY ? 0.0f : m0, b1 = m1 == -INFINITY ? 0.0f : m1;
    uint8_t* pbase = smem + kSmemP;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float p00 = fast_exp2(s[4 * j] - b0), p01 = fast_exp2(s[4 * j + 1] - b0);
      const float p10 = fast_exp2(s[4 * j + 2] - b1), p11 = fast_exp2(s[4 * j + 3] - b1);
      l0 += p00 + p01;
      l1 += p10 + p11;
      const int chunk = 4 * wg + j;  // P row chunk holding tile columns [8 chunk, 8 chunk + 8)
      const int inner = 4 * (lane & 3);
      *reinterpret_cast<uint32_t*>(pbase + r0 * 128 + ((chunk ^ (r0 & 7)) << 4) + inner) = pack_bf16(p00, p01);
      *reinterpret_cast<uint32_t*>(pbase + r1 * 128 + ((chunk ^ (r1 & 7)) << 4) + inner) = pack_bf16(p10, p11);
    }
    fence_proxy_async();
    __syncthreads();
  };

  // The block's query rows into shared memory (cp.async, not committed); padding rows zero-filled.
  auto load_q = [&] {
    const __nv_bfloat16* qp = static_cast<const __nv_bfloat16*>(p.q);
    for (int idx = tid; idx < kRows * kChunksPerRow; idx += kThreads) {
      const int r = idx / kChunksPerRow, c = idx % kChunksPerRow;
      int t, h;
      const bool ok = row_of(r, &t, &h);
      const __nv_bfloat16* src = ok ? qp + (static_cast<int64_t>(t) * H + h) * kMlaHeadDim + c * 8 : qp;
      cp_async16(sbase + kSmemQ + tile_offset(r, c), src, ok);
    }
  };

  if (kPacked && n > 0) {
    load_q();
    load_packed(u_begin, 0);
    cp_async_commit();
    for (int i = 0; i < n; ++i) {
      if (i > 0) {  // P V of tile i - 1
        fence_regs(o);
        issue_pv(0);
        wgmma_wait<0>();
        fence_regs(o);
      }
      cp_async_wait<0>();  // tile i's raw rows (and Q) landed for this thread
      __syncthreads();     // ... for every thread; both warpgroups done reading the bf16 tile
      dequant_tile<kFormat>(smem + kSmemKv + kTileBytes, smem + kSmemKv, tid);
      fence_proxy_async();
      __syncthreads();  // the bf16 tile complete; the staging rows free
      if (i + 1 < n) load_packed(u_begin + i + 1, (i + 1) & 1);
      cp_async_commit();
      issue_qk(0);
      wgmma_wait<0>();
      fence_regs(s);
      softmax(0, u_begin + i, i & 1);
    }
    fence_regs(o);
    issue_pv(0);
    wgmma_wait<0>();
    fence_regs(o);
  }
  if (!kPacked && n > 0) {
    if (kTma && tid == 0) {
      for (int b = 0; b < 4; ++b) mbar_init(bar_base + b * 8, 1);
      mbar_init_fence();
    }
    __syncthreads();
    // Prologue: Q (cp.async), tiles 0 and 1.
    load_q();
    int next_page = 0;  // TMA path: page-table entry of the next tile to load, fetched one step early
    if (kTma) {
      if (lt == 0) {
        tma_tile(tile_slot0(page_entry_of(u_begin), u_begin), 0);
        if (n > 1) tma_tile(tile_slot0(page_entry_of(u_begin + 1), u_begin + 1), 1);
        next_page = page_entry_of(u_begin + 2);
      }
      cp_async_commit();
      cp_async_wait<0>();
      wait_tile_tma(0);
    } else {
      load_tile(u_begin, 0);
      cp_async_commit();
      if (n > 1) load_tile(u_begin + 1, 1);
      cp_async_commit();
      cp_async_wait<1>();
    }
    fence_proxy_async();
    __syncthreads();
    issue_qk(0);
    wgmma_wait<0>();
    fence_regs(s);
    softmax(0, u_begin, 0);

    for (int i = 0; i < n; ++i) {
      const int buf = i & 1;
      fence_regs(o);
      issue_pv(buf);
      wgmma_wait<0>();  // P V of tile i done: this warpgroup's panels of `buf` are free
      fence_regs(o);
      if (i + 1 < n) {
        // Refill `buf` with tile i + 2 before waiting for tile i + 1, so two tiles are in flight.
        if (kTma) {
          named_barrier(1 + wg, 128);  // all four warps of this warpgroup are done reading `buf`
          if (lt == 0 && i + 2 < n) {
            tma_tile(tile_slot0(next_page, u_begin + i + 2), buf);
            next_page = page_entry_of(u_begin + i + 3);
          }
          wait_tile_tma(i + 1);
        } else {
          if (i + 2 < n) load_tile(u_begin + i + 2, buf);
          cp_async_commit();
          cp_async_wait<1>();  // this thread's part of tile i + 1
        }
        fence_proxy_async();
        __syncthreads();  // all of tile i + 1 (and its tile_pos) in place
        issue_qk(buf ^ 1);
        wgmma_wait<0>();
        fence_regs(s);
        softmax(buf ^ 1, u_begin + i + 1, buf ^ 1);
      }
    }
  }

  // Row sums: the quad of lanes sharing a row, then the two warpgroups.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  if ((lane & 3) == 0) {
    red_sum[wg * kRows + r0] = l0;
    red_sum[wg * kRows + r1] = l1;
  }
  __syncthreads();
  l0 = red_sum[r0] + red_sum[kRows + r0];
  l1 = red_sum[r1] + red_sum[kRows + r1];
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  int t0, h0, t1, h1;
  const bool ok0 = row_of(r0, &t0, &h0), ok1 = row_of(r1, &t1, &h1);
  const int col = 256 * wg + 2 * (lane & 3);
  const int64_t TH = static_cast<int64_t>(p.num_tokens) * H;
  if (p.num_splits == 1) {
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out);
    if (ok0) {
      __nv_bfloat16* dst = out + (static_cast<int64_t>(t0) * H + h0) * kMlaValueDim + col;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack_bf16(o[4 * j] * inv0, o[4 * j + 1] * inv0);
    }
    if (ok1) {
      __nv_bfloat16* dst = out + (static_cast<int64_t>(t1) * H + h1) * kMlaValueDim + col;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack_bf16(o[4 * j + 2] * inv1, o[4 * j + 3] * inv1);
    }
  } else {
    // Partial result of this split: normalised O and the row's log2-sum-exp (-inf: nothing attended).
    if (ok0) {
      const int64_t row = split * TH + static_cast<int64_t>(t0) * H + h0;
      float* dst = p.part_o + row * kMlaValueDim + col;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[4 * j] * inv0, o[4 * j + 1] * inv0);
      if (wg == 0 && (lane & 3) == 0) p.part_lse[row] = l0 > 0.0f ? m0 + log2f(l0) : -INFINITY;
    }
    if (ok1) {
      const int64_t row = split * TH + static_cast<int64_t>(t1) * H + h1;
      float* dst = p.part_o + row * kMlaValueDim + col;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[4 * j + 2] * inv1, o[4 * j + 3] * inv1);
      if (wg == 0 && (lane & 3) == 0) p.part_lse[row] = l1 > 0.0f ? m1 + log2f(l1) : -INFINITY;
    }
  }
}

// Merges the splits of each (token, head) row: out = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M). A block
// takes 128 of the row's 512 value columns (a warp reads 512 contiguous bytes of one split) and `groups` warps
// take every groups-th split each, so a few rows with many splits (batch 1, long context) still spread their
// partial reads over many blocks. One round of loads after the wait: each warp loads its splits' log-sum-exps
// together with their O columns and weighs them against its own maximum; the warps' sums are then rescaled to the
// row's maximum (the split-KV merge applied once more). Splits with a -inf log-sum-exp (nothing attended: O never
// written) are loaded but not used.
#ifdef DS_MLA_TRACE
// Diagnostic (-DDS_MLA_TRACE only): per combine block globaltimer at start, after the PDL wait, at the end.
constexpr int kTrcRows = 8192;
__device__ unsigned long long g_trc[kTrcRows * 4];
__device__ unsigned int g_trc_ticket;
#endif
constexpr int kCombineCols = 128;      // value columns per block: 32 lanes x 4
constexpr int kCombineMaxGroups = 16;  // warps per block
constexpr int kCombinePerWarp = kMlaMaxSplits / kCombineMaxGroups;  // splits a warp takes at most (launcher's groups)
__global__ void __launch_bounds__(kCombineMaxGroups * 32) mla_combine_kernel(const float* __restrict__ part_o,
                                                                            const float* __restrict__ part_lse,
                                                                            __nv_bfloat16* __restrict__ out,
                                                                            int64_t rows, int splits,
                                                                            bool early_trigger) {
#ifdef DS_MLA_TRACE
  unsigned long long* trc = nullptr;
  if (threadIdx.x == 0) {
    const unsigned t = atomicAdd(&g_trc_ticket, 1u);
    if (t < kTrcRows) trc = g_trc + static_cast<size_t>(t) * 4;
  }
  if (trc) trc[0] = mla_trace::gtimer();
#endif
  // early_trigger: the next kernel may be scheduled before this one's wait (launch_mla_decode says why).
  if (early_trigger) pdl_launch_dependents();
  pdl_enter();
#ifdef DS_MLA_TRACE
  if (trc) trc[1] = mla_trace::gtimer();
#endif
  __shared__ float4 red[kCombineMaxGroups][32];
  __shared__ float m_sh[kCombineMaxGroups], l_sh[kCombineMaxGroups];
  const int64_t row = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, g = tid >> 5, groups = blockDim.x >> 5;
  const int c = static_cast<int>(blockIdx.y) * kCombineCols + lane * 4;
  float lse[kCombinePerWarp];
  float4 x[kCombinePerWarp];
#pragma unroll
  for (int k = 0; k < kCombinePerWarp; ++k) {
    const int s = g + groups * k;
    lse[k] = -INFINITY;
    x[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (s < splits) {
      lse[k] = part_lse[s * rows + row];
      x[k] = *reinterpret_cast<const float4*>(part_o + (s * rows + row) * kMlaValueDim + c);
    }
  }
  float m, l;
  red[g][lane] = weigh_splits(lse, x, &m, &l);
  if (lane == 0) {
    m_sh[g] = m;
    l_sh[g] = l;
  }
  __syncthreads();
  if (g == 0) {
    float M = -INFINITY;
    for (int q = 0; q < groups; ++q) M = fmaxf(M, m_sh[q]);
    float L = 0.0f;
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int q = 0; q < groups; ++q) {
      if (m_sh[q] == -INFINITY) continue;  // the warp's splits attended nothing
      const float f = exp2f(m_sh[q] - M);
      const float4 r = red[q][lane];
      L += f * l_sh[q];
      a.x += f * r.x;
      a.y += f * r.y;
      a.z += f * r.z;
      a.w += f * r.w;
    }
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    *reinterpret_cast<uint2*>(out + row * kMlaValueDim + c) =
        make_uint2(pack_bf16(a.x * inv, a.y * inv), pack_bf16(a.z * inv, a.w * inv));
  }
#ifdef DS_MLA_TRACE
  if (trc) trc[2] = mla_trace::gtimer();
#endif
}

// Combine + W_UV (launch_mla_combine_vc). Block (head h, 32 output columns), 128 threads: thread = 4 column groups
// of 8 x 32 k groups (k = kg + 32 i, i < 16), its 16 weight chunks in registers; warp w weighs the splits of tokens
// w, w + 4 (log-sum-exps), the block merges the head's O rows into shared memory, then each thread's k
// products, summed over the k groups by shuffles (within a warp) and shared memory (across the 4 warps). With few
// splits (1-4 tokens) the merge is one round of loads instead (combine_vc_merge_one_round).
constexpr int kCvThreads = 128;
constexpr int kCvCols = 32;
constexpr int kGroupBlocks = 128 / kCvCols;  // blocks of one 128-column quantization group (a cluster)
constexpr int kCvKGroups = kCvThreads / (kCvCols / 8);  // 32
constexpr int kCvKIter = kMlaValueDim / kCvKGroups;     // 16
// The merge of kT tokens' (kT == p.tokens) head-h O rows with one round of loads after the wait, for up to kS splits:
// every thread loads the first S splits' log-sum-exps (the same words block-wide) together with its columns of their
// O rows, one L2 round trip instead of two (weights, then rows). Rows of splits with a zero weight (nothing
// attended: never written) are loaded but not used. kT * kS float4 in registers beside the 16 weight chunks.
template <int kT, int kS>
__device__ __forceinline__ void combine_vc_merge_one_round(const MlaCombineVcParams& p, int h, int tid, int S,
                                                           float (*o_sh)[kMlaValueDim]) {
  const int64_t TH = static_cast<int64_t>(kT) * p.heads;
  float lse[kT][kS];
  float4 x[kT][kS];
#pragma unroll
  for (int t = 0; t < kT; ++t)
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      lse[t][s] = -INFINITY;
      x[t][s] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (s < S) {
        const int64_t row = s * TH + static_cast<int64_t>(t) * p.heads + h;
        lse[t][s] = p.part_lse[row];
        x[t][s] = *reinterpret_cast<const float4*>(p.part_o + row * kMlaValueDim + 4 * tid);
      }
    }
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    float mx, sum;
    const float4 acc = weigh_splits(lse[t], x[t], &mx, &sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    *reinterpret_cast<float4*>(&o_sh[t][4 * tid]) = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
  }
}
// The general merge: per token a warp weighs every split (log-sum-exps into w_sh), then the block reads the O rows
// of the splits with a non-zero weight, four at a time.
__device__ __forceinline__ void combine_vc_merge_general(const MlaCombineVcParams& p, int h, int tid,
                                                         float (*o_sh)[kMlaValueDim], float (*w_sh)[kMlaMaxSplits],
                                                         float* inv_sh) {
  __shared__ int last_sh[kMlaCombineVcMaxTokens];  // last split with a non-zero weight, per token (-1: none)
  const int lane = tid & 31, warp = tid >> 5;
  const int T = p.tokens, S = p.splits;
  const int64_t TH = static_cast<int64_t>(T) * p.heads;
  for (int t = warp; t < T; t += kCvThreads / 32) {
    const int64_t row = static_cast<int64_t>(t) * p.heads + h;
    float mx = -INFINITY;
    for (int s = lane; s < S; s += 32) mx = fmaxf(mx, p.part_lse[s * TH + row]);
    mx = warp_max(mx);
    float sum = 0.0f;
    int last = -1;
    for (int s = lane; s < S; s += 32) {
      const float lse = p.part_lse[s * TH + row];
      const float wt = lse == -INFINITY ? 0.0f : exp2f(lse - mx);
      w_sh[t][s] = wt;
      sum += wt;
      if (wt != 0.0f) last = s;
    }
    sum = warp_sum(sum);
    for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
    if (lane == 0) {
      inv_sh[t] = sum > 0.0f ? 1.0f / sum : 0.0f;
      last_sh[t] = last;
    }
  }
  __syncthreads();
  // The head's merged O rows: thread takes columns [4 tid, 4 tid + 4) of two tokens at a time, four splits per
  // round, every load of a round issued before any is used (the rounds are L2 latency, not bandwidth); splits with
  // a zero weight (nothing attended, O never written) are not read.
  for (int t0 = 0; t0 < T; t0 += 2) {
    const int n_t = min(2, T - t0);
    const int s_end = 1 + max(last_sh[t0], n_t > 1 ? last_sh[t0 + 1] : -1);
    float4 acc[2] = {make_float4(0.0f, 0.0f, 0.0f, 0.0f), make_float4(0.0f, 0.0f, 0.0f, 0.0f)};
    for (int s = 0; s < s_end; s += 4) {
      float wt[2][4];
      float4 x[2][4];
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          wt[e][u] = (e < n_t && s + u < s_end) ? w_sh[t0 + e][s + u] : 0.0f;
          x[e][u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          if (wt[e][u] != 0.0f)
            x[e][u] = *reinterpret_cast<const float4*>(
                p.part_o + ((s + u) * TH + static_cast<int64_t>(t0 + e) * p.heads + h) * kMlaValueDim + 4 * tid);
        }
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          acc[e].x += wt[e][u] * x[e][u].x;
          acc[e].y += wt[e][u] * x[e][u].y;
          acc[e].z += wt[e][u] * x[e][u].z;
          acc[e].w += wt[e][u] * x[e][u].w;
        }
    }
    for (int e = 0; e < n_t; ++e) {
      const float inv = inv_sh[t0 + e];
      *reinterpret_cast<float4*>(&o_sh[t0 + e][4 * tid]) =
          make_float4(acc[e].x * inv, acc[e].y * inv, acc[e].z * inv, acc[e].w * inv);
    }
  }
}

// The output stored with its block-FP8 quantization (MlaCombineVcParams::q; launched in clusters of 4: the blocks of
// one 128-column group, rank = its 32-column quarter). Warp t holds token t's 32 columns, a lane each (T <= 4 =
// the warps). Scale and bytes as quant_act makes them from the stored bf16 values: the group's |max| (order-free),
// fp8::block_scale, e4m3 of v / s rounded to nearest.
__device__ __forceinline__ void combine_vc_store_quantized(const MlaCombineVcParams& p, int h, int c0,
                                                           const float (*red)[kMlaCombineVcMaxTokens][kCvCols]) {
  static_assert(kMlaCombineVcMaxTokens <= kCvThreads / 32, "a warp per token");
  // [token][rank]: every quarter's |max|, pushed into each block of the cluster by its owner, so one cluster barrier
  // publishes them (read back locally, no block's shared memory is read after it: no second barrier before exit;
  // s66b's source page: the two barriers' fences and waits were 27% of the kernel's samples at batch 1).
  __shared__ float amax_sh[kMlaCombineVcMaxTokens][kGroupBlocks];
  const int lane = threadIdx.x & 31, t = threadIdx.x >> 5;
  const bool live = t < p.tokens;
  const int64_t K = static_cast<int64_t>(p.heads) * p.v, col = static_cast<int64_t>(h) * p.v + c0 + lane;
  float v = 0.0f;
  if (live) {
    float sum = 0.0f;
#pragma unroll
    for (int g = 0; g < kCvThreads / 32; ++g) sum += red[g][t][lane];
    const __nv_bfloat16 b = __float2bfloat16(sum);
    static_cast<__nv_bfloat16*>(p.out)[t * K + col] = b;
    v = __bfloat162float(b);
  }
  const float mine = warp_max(fabsf(v));
  const uint32_t at = smem_u32(&amax_sh[t][cluster_ctarank()]);
  if (lane < kGroupBlocks) st_cluster_f32(cluster_map(at, lane), mine);
  cluster_sync();  // every quarter's maxima written into every block (release / acquire across the cluster)
  float amax = 0.0f;
#pragma unroll
  for (int r = 0; r < kGroupBlocks; ++r) amax = fmaxf(amax, amax_sh[t][r]);
  if (live) {
    const float sc = fp8::block_scale(amax, p.q_ue8m0);
    p.q[t * K + col] = fp8::to_e4m3(__fdiv_rn(v, sc));
    if (lane == 0 && c0 % 128 == 0) p.q_scales[t * (K / 128) + col / 128] = sc;
  }
}

// Splits the one-round merge takes at 1-2 and at 3-4 tokens (registers: at most 24 float4 of O rows).
constexpr int kCvOneRoundSplits12 = 8, kCvOneRoundSplits34 = 6;

// kT > 0: exactly kT tokens, merged in one round when at most kS splits attend something (all the plan's splits, or
// those counted from the positions), else by the general merge; kT == 0: the general merge. One instantiation per
// token count, so the one-token kernel keeps its registers (more O rows in flight cost the multi-token ones
// occupancy, which the launcher checks).
template <int kT, int kS>
__global__ void __launch_bounds__(kCvThreads) mla_combine_vc_kernel(const MlaCombineVcParams p) {
  __shared__ float w_sh[kMlaCombineVcMaxTokens][kMlaMaxSplits];
  __shared__ float inv_sh[kMlaCombineVcMaxTokens];
  __shared__ __align__(16) float o_sh[kMlaCombineVcMaxTokens][kMlaValueDim];
  __shared__ float red[kCvThreads / 32][kMlaCombineVcMaxTokens][kCvCols];  // per warp: its 8 k groups summed
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cpb = p.v / kCvCols;
  const int h = blockIdx.x / cpb, c0 = (blockIdx.x % cpb) * kCvCols;
  const int cg = tid & 3, kg = tid >> 2;
  const __nv_bfloat16* w =
      static_cast<const __nv_bfloat16*>(p.w_vc) + static_cast<int64_t>(h) * kMlaValueDim * p.v + c0 + 8 * cg;
  uint4 wv[kCvKIter];  // weights: never written by a forward, so loaded before the wait
#pragma unroll
  for (int i = 0; i < kCvKIter; ++i)
    wv[i] = *reinterpret_cast<const uint4*>(w + static_cast<int64_t>(kg + kCvKGroups * i) * p.v);
  // The splits to merge in one round: all of the plan's, or with the step's positions only those that attend
  // something (metadata uploaded before the forward, so read before the wait).
  int lim = p.splits;
  if (kT > 0 && p.positions && p.seq_lens) {
    lim = 0;
#pragma unroll
    for (int t = 0; t < kT; ++t)
      lim = max(lim, mla_decode_active_splits(min(p.positions[t] + 1, p.seq_lens[t]), p.splits));
  }
  pdl_enter();
  const int T = p.tokens;
  if constexpr (kT > 0) {
    if (lim <= kS)
      combine_vc_merge_one_round<kT, kS>(p, h, tid, lim, o_sh);
    else
      combine_vc_merge_general(p, h, tid, o_sh, w_sh, inv_sh);
  } else {
    combine_vc_merge_general(p, h, tid, o_sh, w_sh, inv_sh);
  }
  __syncthreads();
  // kT tokens' accumulators when the count is exact: one body for the most tokens with early exits left one token a
  // long cold straight line (s65g's source page: 16-20% of the samples on no_instruction).
  constexpr int kAccT = kT > 0 ? kT : kMlaCombineVcMaxTokens;
  float acc[kAccT][8] = {};
#pragma unroll
  for (int i = 0; i < kCvKIter; ++i) {
    fma_bf16x8(acc, wv[i], &o_sh[0][kg + kCvKGroups * i], kMlaValueDim, T);
  }
  // The warp's 8 k groups (lanes of equal lane % 4) by shuffles, then the 4 warps through shared memory.
#pragma unroll
  for (int t = 0; t < kAccT; ++t) {
    if (t >= T) break;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float x = column_sum(acc[t][j]);
      if (lane < 4) red[warp][t][8 * cg + j] = x;
    }
  }
  __syncthreads();
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out);
  if (p.q) {
    combine_vc_store_quantized(p, h, c0, red);
    return;
  }
  for (int idx = tid; idx < T * kCvCols; idx += kCvThreads) {
    const int t = idx / kCvCols, c = idx % kCvCols;
    float sum = 0.0f;
#pragma unroll
    for (int g = 0; g < kCvThreads / 32; ++g) sum += red[g][t][c];
    out[(static_cast<int64_t>(t) * p.heads + h) * p.v + c0 + c] = __float2bfloat16(sum);
  }
}

// ---- reference kernel: one block per (head, token) ----
constexpr int kRefThreads = 128;
constexpr int kRefChunk = 64;
constexpr int kRefMaxV = 1024;

__global__ void __launch_bounds__(kRefThreads) mla_decode_reference_kernel(const MlaDecodeParams p) {
  extern __shared__ float ref_smem[];  // q row [head_dim], scores [kRefChunk]
  __shared__ int64_t slots[kRefChunk];
  __shared__ int seq_sh;
  const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int D = p.head_dim, V = p.v_dim, H = p.num_heads;
  float* qf = ref_smem;
  float* sc = ref_smem + D;
  const uint8_t* cache = static_cast<const uint8_t*>(p.cache);
  const int64_t row_bytes = kv_row_layout(p.cache_format, V, D - V).row_bytes;
  auto value = [&](int64_t slot, int k) { return kv_row_value(cache + slot * row_bytes, p.cache_format, V, D - V, k); };
  if (tid == 0) {
    int s = 0;
    while (s + 1 < p.num_seqs && p.q_starts[s + 1] <= t) ++s;
    seq_sh = s;
  }
  const __nv_bfloat16* qrow = static_cast<const __nv_bfloat16*>(p.q) + (static_cast<int64_t>(t) * H + h) * D;
  for (int d = tid; d < D; d += kRefThreads) qf[d] = __bfloat162float(qrow[d]);
  __syncthreads();
  const int seq = seq_sh;
  const int kv_end = min(p.positions[t] + 1, p.seq_lens[seq]);
  const int n_cand = p.topk ? p.topk_k : kv_end;
  const int32_t* btab = p.block_table + static_cast<int64_t>(seq) * p.max_pages;
  const float sl2 = p.scale * kLog2e;
  float acc[kRefMaxV / kRefThreads];
#pragma unroll
  for (int k = 0; k < kRefMaxV / kRefThreads; ++k) acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int base = 0; base < n_cand; base += kRefChunk) {
    if (tid < kRefChunk) {
      const int e = base + tid;
      const int pos = e < n_cand ? (p.topk ? p.topk[static_cast<int64_t>(t) * p.topk_k + e] : e) : -1;
      slots[tid] = (pos >= 0 && pos < kv_end)
                       ? static_cast<int64_t>(btab[pos / p.page_size]) * p.page_size + pos % p.page_size
                       : -1;
    }
    __syncthreads();
    for (int i = warp; i < kRefChunk; i += kRefThreads / 32) {
      const int64_t slot = slots[i];
      float d = 0.0f;
      if (slot >= 0) {
        for (int k = lane; k < D; k += 32) d += qf[k] * value(slot, k);
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
      }
      if (lane == 0) sc[i] = slot >= 0 ? d * sl2 : -INFINITY;
    }
    __syncthreads();
    float cmax = -INFINITY;
    for (int i = 0; i < kRefChunk; ++i) cmax = fmaxf(cmax, sc[i]);
    const float mn = fmaxf(m, cmax);
    if (mn > -INFINITY) {
      const float alpha = exp2f(m - mn);
      l *= alpha;
#pragma unroll
      for (int k = 0; k < kRefMaxV / kRefThreads; ++k) acc[k] *= alpha;
      m = mn;
      for (int i = 0; i < kRefChunk; ++i) {
        if (sc[i] == -INFINITY) continue;
        const float w = exp2f(sc[i] - m);
        l += w;
#pragma unroll
        for (int k = 0; k < kRefMaxV / kRefThreads; ++k) {
          const int d = tid + k * kRefThreads;
          if (d < V) acc[k] += w * value(slots[i], d);
        }
      }
    }
    __syncthreads();
  }
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + (static_cast<int64_t>(t) * H + h) * V;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int k = 0; k < kRefMaxV / kRefThreads; ++k) {
    const int d = tid + k * kRefThreads;
    if (d < V) out[d] = __float2bfloat16(acc[k] * inv);
  }
}

}  // namespace

bool mla_decode_fast_supported(int head_dim, int v_dim) {
  return head_dim == kMlaHeadDim && v_dim == kMlaValueDim;
}

int mla_decode_num_splits(int num_seqs, int num_tokens, int max_q_len, int num_heads, int max_context, bool topk,
                          int num_sms, int rows_per_block) {
  if (num_seqs <= 0 || max_q_len <= 0 || max_context <= 0 || num_heads <= 0 || num_sms <= 0 || rows_per_block <= 0)
    return 1;
  const int64_t head_chunks = (num_heads + rows_per_block - 1) / rows_per_block;
  const int64_t row_tiles = topk ? max_q_len * head_chunks
                                 : (static_cast<int64_t>(max_q_len) * num_heads + rows_per_block - 1) / rows_per_block;
  const int64_t blocks = num_seqs * row_tiles;
  const int units = (max_context + kTile - 1) / kTile;
  // Scratch stays under 256 MB (prefill-sized calls fill the machine without splitting anyway).
  const int64_t row_bytes = static_cast<int64_t>(num_tokens) * num_heads * (kMlaValueDim + 1) * 4;
  int best = 1;
  double best_cost = 1e30;
  for (int s = 1; s <= std::min(units, kMlaMaxSplits); ++s) {
    if (s > 1 && row_bytes * s > (int64_t{256} << 20)) break;
    // Waves of equal blocks, each ~2 tiles of fixed cost (Q load, pipeline fill, epilogue), plus the combine.
    const double waves = static_cast<double>((blocks * s + num_sms - 1) / num_sms);
    const double cost = waves * ((units + s - 1) / s + 2.0) + (s > 1 ? 1.0 : 0.0);
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

size_t mla_decode_lse_offset(int num_splits, int num_tokens, int num_heads) {
  if (num_splits <= 1) return 0;
  const size_t o_bytes = static_cast<size_t>(num_splits) * num_tokens * num_heads * kMlaValueDim * 4;
  return (o_bytes + 255) & ~size_t{255};
}

size_t mla_decode_scratch_bytes(int num_splits, int num_tokens, int num_heads) {
  if (num_splits <= 1) return 0;
  return mla_decode_lse_offset(num_splits, num_tokens, num_heads) +
         static_cast<size_t>(num_splits) * num_tokens * num_heads * 4;
}

EncodeTiledFn encode_tiled() {
  static EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

bool encode_2d_swizzle128(CUtensorMap* out, CUtensorMapDataType type, const void* base, uint64_t cols, uint64_t rows,
                          uint64_t row_stride, uint32_t box_cols, uint32_t box_rows) {
  EncodeTiledFn fn = encode_tiled();
  if (!fn) return false;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_stride};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t estrides[2] = {1, 1};
  return fn(out, type, 2, const_cast<void*>(base), dims, strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

namespace {

// [slots, 576] bf16 cache as a 2D tensor map: boxes of 64 columns x 32 rows, 128-byte swizzle (the layout
// tile_offset describes), zero fill past the last slot.
bool make_cache_map(const MlaDecodeParams& p, CUtensorMap* map) {
  if (p.num_slots <= 0 || p.num_slots > INT32_MAX || (reinterpret_cast<uintptr_t>(p.cache) & 15)) return false;
  return encode_2d_swizzle128(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.cache, kMlaHeadDim,
                              static_cast<uint64_t>(p.num_slots), uint64_t{kMlaHeadDim} * 2, 64, kTmaBoxRows);
}

template <bool kTopk, bool kTma, int kFormat = kKvBf16>
cudaError_t launch_variant(const MlaDecodeParams& p, const CUtensorMap& map, dim3 grid, cudaStream_t stream) {
  static PerDevice<cudaError_t> attrs;  // raising the shared-memory limit once per kernel and device suffices
  const cudaError_t e = attrs.get([] {
    return cudaFuncSetAttribute(mla_decode_kernel<kTopk, kTma, kFormat>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                kSmemBytes);
  });
  if (e != cudaSuccess) return e;
  return launch_pdl(mla_decode_kernel<kTopk, kTma, kFormat>, grid, kThreads, kSmemBytes, stream, p, map);
}

}  // namespace

#ifdef DS_MLA_TRACE
int mla_combine_trace_read(unsigned long long* host, int rows) {
  return mla_trace::read(&g_trc_ticket, g_trc, kTrcRows, 4, host, rows);
}
#endif

cudaError_t launch_mla_decode(const MlaDecodeParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0 || p.num_seqs == 0 || p.max_q_len == 0) return cudaSuccess;
  if (!mla_decode_fast_supported(p.head_dim, p.v_dim) || p.page_size <= 0 || p.num_splits < 1 ||
      p.num_splits > kMlaMaxSplits || (p.num_splits > 1 && (!p.part_o || !p.part_lse)) || p.cache_format < kKvBf16 ||
      p.cache_format > kKvE5M2)
    return cudaErrorInvalidValue;
  const bool topk = p.topk != nullptr;
  const int head_chunks = (p.num_heads + kRows - 1) / kRows;
  const int64_t row_tiles = topk ? static_cast<int64_t>(p.max_q_len) * head_chunks
                                 : (static_cast<int64_t>(p.max_q_len) * p.num_heads + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(p.num_splits),
                  static_cast<unsigned>(p.num_seqs));
  // DSERVE_MLA_NO_TMA=1 forces the cp.async loads (a diagnostic switch; results are identical).
  static const bool tma_disabled = env_flag("DSERVE_MLA_NO_TMA", false);
  const bool m16_forced = mla_decode_m16_mode() == 1;
  CUtensorMap map{};
  // At most 16 query rows per sequence on a bf16 cache: the transposed kernel (no padded tensor work).
  const bool t16 = !m16_forced && p.use_tma && !tma_disabled && mla_decode_t16_supported(p) && make_cache_map(p, &map);
  const bool m16 = !t16 && mla_decode_m16_supported(p);
  const bool tma = !t16 && !m16 && !topk && p.cache_format == kKvBf16 && p.use_tma && !tma_disabled &&
                   p.page_size % kTile == 0 && make_cache_map(p, &map);
  int merged = 1;  // splits the decode kernel merged itself (the transposed kernel's clusters)
  cudaError_t e = t16                          ? launch_mla_decode_t16(p, &map, stream, &merged)
                  : m16                        ? launch_mla_decode_m16(p, stream)
                  : p.cache_format == kKvE4M3  ? (topk ? launch_variant<true, false, kKvE4M3>(p, map, grid, stream)
                                                        : launch_variant<false, false, kKvE4M3>(p, map, grid, stream))
                  : p.cache_format == kKvE5M2  ? (topk ? launch_variant<true, false, kKvE5M2>(p, map, grid, stream)
                                                        : launch_variant<false, false, kKvE5M2>(p, map, grid, stream))
                  : topk                       ? launch_variant<true, false>(p, map, grid, stream)
                  : tma                        ? launch_variant<false, true>(p, map, grid, stream)
                                               : launch_variant<false, false>(p, map, grid, stream);
  if (e != cudaSuccess) return e;
  const int splits = p.num_splits / merged;
  if (splits > 1 && !p.skip_combine) {
    const int64_t rows = static_cast<int64_t>(p.num_tokens) * p.num_heads;
    // Warps per block: up to 16, about four splits each (fewer for the few-split, many-row steps of big batches);
    // a warp takes at most kCombinePerWarp.
    int groups = 1;
    while (groups < kCombineMaxGroups && groups * 4 < splits) groups *= 2;
    static_assert(kMlaValueDim % kCombineCols == 0 && kCombineMaxGroups * kCombinePerWarp >= kMlaMaxSplits);
    // The combine lets the next kernel be scheduled at its entry instead of after its wait, so that kernel's
    // blocks take the multiprocessors the decode's blocks leave and its prologue overlaps the decode's tail and
    // this merge (DSERVE_MLA_COMBINE_EARLY=0: after the wait). H100, session 23 (s23d, two runs each):
    // dserve_mla_bench batch 1 x 32K 20.1 / 20.2 vs 20.8 / 20.9 us, batch 8 x 4K 20.6 / 20.6 vs 21.9 / 21.9; V2-Lite
    // bench-one-batch (s23e, alternating) unchanged at the batches that run this combine: 8 / 16 / 32 at input
    // 256 and 8 / 32 at input 4096 within +-0.07 ms either way. So the kernel after a combine cannot count on the
    // decode having completed before its own pdl_wait (pdl.cuh); no kernel after it reads the decode's outputs.
    static const bool early = env_flag("DSERVE_MLA_COMBINE_EARLY", true);
    return launch_pdl(mla_combine_kernel, dim3(static_cast<unsigned>(rows), kMlaValueDim / kCombineCols), groups * 32, 0,
                      stream, p.part_o, p.part_lse, static_cast<__nv_bfloat16*>(p.out), rows, splits, early);
  }
  return cudaSuccess;
}

namespace {
// Whether `blocks` blocks of that combine_vc variant run in one wave on the current device (its occupancy, cached).
template <int kT, int kS>
bool combine_vc_one_wave(int64_t blocks) {
  static const int per_sm = [] {
    int n = 0;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, mla_combine_vc_kernel<kT, kS>, kCvThreads, 0) == cudaSuccess
               ? n
               : 0;
  }();
  return static_cast<int64_t>(per_sm) * device_sm_count() >= blocks;
}
}  // namespace

cudaError_t launch_mla_combine_vc(const MlaCombineVcParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.tokens > kMlaCombineVcMaxTokens || p.heads <= 0 || p.splits < 1 || p.splits > kMlaMaxSplits ||
      p.v <= 0 || p.v % kCvCols != 0 || !p.part_o || !p.part_lse || !p.w_vc || !p.out ||
      (reinterpret_cast<uintptr_t>(p.w_vc) & 15) || (p.q && (p.v % 128 != 0 || !p.q_scales)))
    return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  const int64_t blocks = static_cast<int64_t>(p.heads) * (p.v / kCvCols);
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  // The one-round merge where its splits fit and its blocks still fit one wave (the multi-token variants hold up to
  // 24 O-row vectors a thread: fewer blocks an SM).
  const dim3 grid(static_cast<unsigned>(blocks));
  const int T = p.tokens, S = p.splits;
  static_assert(kMlaCombineVcMaxTokens == 4, "one-round merges for 1-4 tokens");
  // With the step's positions the kernel counts the splits that attend something and takes the general merge itself
  // when they are too many, so any plan may try the one-round variant. When every planned split fits one round there
  // is nothing to count: the positions are dropped (no reads ahead of the wait).
  MlaCombineVcParams q = p;
  if (S <= (T <= 2 ? kCvOneRoundSplits12 : kCvOneRoundSplits34)) q.positions = q.seq_lens = nullptr;
  const bool counted = q.positions && q.seq_lens;
  void (*kernel)(const MlaCombineVcParams) = mla_combine_vc_kernel<0, 0>;
  if (T == 1 && (counted || S <= kCvOneRoundSplits12))
    kernel = mla_combine_vc_kernel<1, kCvOneRoundSplits12>;
  else if (T == 2 && (counted || S <= kCvOneRoundSplits12) && combine_vc_one_wave<2, kCvOneRoundSplits12>(blocks))
    kernel = mla_combine_vc_kernel<2, kCvOneRoundSplits12>;
  else if (T == 3 && (counted || S <= kCvOneRoundSplits34) && combine_vc_one_wave<3, kCvOneRoundSplits34>(blocks))
    kernel = mla_combine_vc_kernel<3, kCvOneRoundSplits34>;
  else if (T == 4 && (counted || S <= kCvOneRoundSplits34) && combine_vc_one_wave<4, kCvOneRoundSplits34>(blocks))
    kernel = mla_combine_vc_kernel<4, kCvOneRoundSplits34>;
  // With the quantization, a cluster is the 4 blocks of one 128-column group (v % 128 == 0: groups stay in a head).
  return launch_pdl_cluster(kernel, grid, dim3(q.q ? kGroupBlocks : 1u), kCvThreads, 0, stream, q);
}

cudaError_t launch_mla_decode_reference(const MlaDecodeParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0 || p.num_heads == 0) return cudaSuccess;
  if (p.head_dim <= 0 || p.head_dim > 1024 || p.v_dim <= 0 || p.v_dim > kRefMaxV || p.v_dim > p.head_dim ||
      p.page_size <= 0 || p.cache_format < kKvBf16 || p.cache_format > kKvE5M2)
    return cudaErrorInvalidValue;
  const size_t smem = (static_cast<size_t>(p.head_dim) + kRefChunk) * sizeof(float);
  return launch_plain(mla_decode_reference_kernel,
                      dim3(static_cast<unsigned>(p.num_heads), static_cast<unsigned>(p.num_tokens)), kRefThreads, smem,
                      stream, p);
}

}  // namespace ds::kernels
