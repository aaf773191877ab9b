// MLA absorbed decode with 16 query rows per block as the M side of mma.sync m16n8k16 tiles: one new token of
// at most 16 heads (V2-Lite, V3 heads split 8 ways), where the wgmma kernel of mla_decode.cu computes 64 rows per
// tile, 48 of them empty; and packed FP8 caches whose sequences have at most 16 query rows (rows = a sequence's
// flattened (token, head) pairs, each with its own causal end; the grid would take more row blocks). Block = (row block, split, sequence), 8 warps; per 64-row
// cache tile: S = Q K^T (warp w: tile rows [8 w, 8 w + 8), K = 576, four independent accumulator chains), the
// online-softmax row max across warps through shared memory, P (bf16) through shared memory, then O += P V
// (warp w: value columns [64 w, 64 w + 64), B fragments by ldmatrix.trans). bf16 cache: two tile buffers, the
// next tile loading with cp.async while one is used (page-table entries read one tile ahead); rows padded to
// 1168 bytes so every fragment load is free of bank conflicts. Packed FP8 cache (kernels/kv_fp8.h): the packed
// rows (656 / 576 bytes) land by cp.async in two staging buffers (two tiles in flight) and are dequantised into
// the one bf16 tile (e4m3 x block scale rounded to bf16, exactly as the values the gather gives prefill). Same
// split and partial conventions as mla_decode.cu (its combine kernel merges the splits). Measured 32-row tiles
// with 4 warps and five buffers too: slower in every case (BENCHMARKS.md).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "core/env.h"
#include "kernels/kv_fp8.cuh"
#include "kernels/per_device.h"
#include "kernels/mla_decode.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kHeads = 16;                 // the mma's M
constexpr int kUnit = 64;                  // the split plan's unit (mla_decode_num_splits)
static_assert(kUnit == kMlaSplitUnit, "tiles are the split plan's units");
constexpr int kStride = kMlaHeadDim + 8;   // bf16 per shared row: 1168 bytes, 292 words = 4 (mod 32) banks apart
constexpr int kChunks = kMlaHeadDim / 8;   // 16-byte chunks per row: 72
constexpr float kLog2e = 1.4426950408889634f;

// kTileRows cache rows per tile, one warp per 8 of them (Q K^T), the same warps splitting the 512 value columns
// (P V); 64-row tiles take two buffers (32-row ones, measured slower, five). Packed caches: one bf16 tile and two
// staging buffers of packed rows.
template <int kTileRows, int kFormat>
struct Shape {
  static constexpr bool kPacked = kFormat != kKvBf16;
  static constexpr int kTile = kTileRows;
  static constexpr int kWarps = kTileRows / 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStages = kPacked ? 1 : kTileRows == 32 ? 5 : 2;  // bf16 tile buffers
  static constexpr int kRowBytes = kv_row_layout(kFormat, kMlaValueDim, kMlaHeadDim - kMlaValueDim).row_bytes;
  static constexpr int kRowChunks = kRowBytes / 16;                      // 16-byte chunks per packed row
  static constexpr int kStaging = kPacked ? 2 : 0;                       // packed tile buffers
  static constexpr int kCols = kMlaValueDim / kWarps;  // value columns per warp
  static constexpr int kNT = kCols / 8;                // n8 tiles per warp
  static constexpr int kPStride = kTile + 8;           // bf16 per P row (conflict-free fragment loads)
  static constexpr int kSmemQ = 0;
  static constexpr int kSmemKv = kSmemQ + kHeads * kStride * 2;
  static constexpr int kSmemStage = kSmemKv + kStages * kTile * kStride * 2;
  static constexpr int kSmemP = kSmemStage + kStaging * kTile * kRowBytes;
  static constexpr int kSmemRed = kSmemP + kHeads * kPStride * 2;  // float [warps][16 rows]
  static constexpr int kSmemBytes = kSmemRed + kWarps * kHeads * 4;
  static_assert(kRowChunks * 16 == kRowBytes, "packed rows copied in 16-byte chunks");
  static_assert(kSmemBytes <= 232448, "exceeds the 227 KB opt-in shared memory of sm_90");
};

// Dequantises one packed row `src` of a staging buffer into bf16 tile row `dst` (this thread's 16-byte chunks
// part, part + 4, ...).
template <int kFormat>
__device__ __forceinline__ void dequant_row(const uint8_t* src, __nv_bfloat16* dst, int part) {
  constexpr KvRowLayout L = kv_row_layout(kFormat, kMlaValueDim, kMlaHeadDim - kMlaValueDim);
  constexpr __nv_fp8_interpretation_t kKind = kFormat == kKvE4M3 ? __NV_E4M3 : __NV_E5M2;
  constexpr int kFp8Chunks = (kFormat == kKvE4M3 ? kMlaValueDim : kMlaHeadDim) / 16;  // 16 fp8 values each
#pragma unroll
  for (int j = 0; j < (kFp8Chunks + 3) / 4; ++j) {
    const int c = part + 4 * j;
    if (c >= kFp8Chunks) break;
    const uint4 raw = *reinterpret_cast<const uint4*>(src + 16 * c);
    const float scale = kFormat == kKvE4M3 ? reinterpret_cast<const float*>(src + L.scale_off)[c / 8] : 1.0f;
    const uint2 o0 = fp8x4_to_bf16x4<kKind>(raw.x, scale), o1 = fp8x4_to_bf16x4<kKind>(raw.y, scale);
    const uint2 o2 = fp8x4_to_bf16x4<kKind>(raw.z, scale), o3 = fp8x4_to_bf16x4<kKind>(raw.w, scale);
    uint4* d = reinterpret_cast<uint4*>(dst + 16 * c);
    d[0] = make_uint4(o0.x, o0.y, o1.x, o1.y);
    d[1] = make_uint4(o2.x, o2.y, o3.x, o3.y);
  }
  if constexpr (kFormat == kKvE4M3) {  // the bf16 rope part as it is: 8 chunks of 8 values
#pragma unroll
    for (int c = part; c < (kMlaHeadDim - kMlaValueDim) / 8; c += 4)
      *reinterpret_cast<uint4*>(dst + kMlaValueDim + 8 * c) = *reinterpret_cast<const uint4*>(src + L.rope_off + 16 * c);
  }
}

template <int kTileRows, int kFormat>
__global__ void __launch_bounds__(Shape<kTileRows, kFormat>::kThreads, 1) mla_decode_m16_kernel(const MlaDecodeParams p) {
  using S = Shape<kTileRows, kFormat>;
  constexpr bool kPacked = S::kPacked;
  constexpr int kTile = S::kTile, kWarps = S::kWarps, kThreads = S::kThreads, kStages = S::kStages;
  constexpr int kCols = S::kCols, kNT = S::kNT, kPStride = S::kPStride, kRowBytes = S::kRowBytes;
  constexpr int kSmemQ = S::kSmemQ, kSmemKv = S::kSmemKv, kSmemP = S::kSmemP, kSmemRed = S::kSmemRed;
  pdl_enter();
  extern __shared__ __align__(16) uint8_t smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem + kSmemQ);
  __nv_bfloat16* kv_s = reinterpret_cast<__nv_bfloat16*>(smem + kSmemKv);
  uint8_t* stage_s = smem + S::kSmemStage;
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + kSmemP);
  float* red = reinterpret_cast<float*>(smem + kSmemRed);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int seq = blockIdx.z, split = blockIdx.y, H = p.num_heads;
  // Block rows: the sequence's flattened (token, head) pairs [16 x, 16 x + 16); row r is pair q0 * H + row0 + r.
  const int q0 = p.q_starts[seq];
  const int pairs = (p.q_starts[seq + 1] - q0) * H;
  const int row0 = static_cast<int>(blockIdx.x) * kHeads;
  if (row0 >= pairs) return;  // block-uniform
  const int rows = min(kHeads, pairs - row0);
  auto row_pos = [&](int r) { return r < rows ? p.positions[q0 + (row0 + r) / H] : -1; };
  const int kv_end = max(0, min(row_pos(rows - 1) + 1, p.seq_lens[seq]));  // positions grow within a sequence
  const int n_units = (kv_end + kUnit - 1) / kUnit;
  const MlaSplitUnits mine = mla_decode_split_units(n_units, p.num_splits, split);
  const int u_begin = mine.begin, n = mine.count;
  const int64_t TH = static_cast<int64_t>(p.num_tokens) * H;
  const int64_t pair0 = static_cast<int64_t>(q0) * H + row0;  // (token, head) index of block row 0
  if (n == 0 && p.num_splits > 1) {  // a split past this context's end: only its log-sum-exp
    if (tid < rows) p.part_lse[split * TH + pair0 + tid] = -INFINITY;
    return;
  }
  const int pos0 = u_begin * kUnit;                              // first context position of this split
  const int pos_end = min(kv_end, (u_begin + n) * kUnit);
  const int nt = (pos_end - pos0 + kTile - 1) / kTile;           // tiles (0 only for an empty context)
  const int qpos0 = row_pos(g), qpos1 = row_pos(g + 8);          // causal ends of this thread's rows (-1: none)

  const uint8_t* cache = static_cast<const uint8_t*>(p.cache);
  const int32_t* btab = p.block_table + static_cast<int64_t>(seq) * p.max_pages;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) + pair0 * kMlaHeadDim;
  // Rows beyond the context (and query rows beyond the block's pairs) are zero-filled: no stale or NaN value is
  // multiplied.
  for (int idx = tid; idx < kHeads * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    cp_async16(q_s + r * kStride + c * 8, q + static_cast<int64_t>(r < rows ? r : 0) * kMlaHeadDim + c * 8, r < rows);
  }
  // Four threads per tile row, interleaved 16-byte chunks. A row's page-table entry is read one iteration before
  // its tile is loaded (a dependent global read in front of the copies would stall the loop).
  const int lr = tid >> 2, part = tid & 3;
  auto entry_of = [&](int i) -> int {  // page of this thread's row of tile i, -1 beyond the split
    const int pos = pos0 + i * kTile + lr;
    return i < nt && pos < pos_end ? btab[pos / p.page_size] : -1;
  };
  auto load_tile = [&](int i, int entry) {
    const int pos = pos0 + i * kTile + lr;
    const bool ok = entry >= 0;
    const int64_t slot = ok ? static_cast<int64_t>(entry) * p.page_size + pos % p.page_size : 0;
    const uint8_t* src = cache + slot * kRowBytes;
    if constexpr (kPacked) {
      uint8_t* dst = stage_s + ((i & 1) * kTile + lr) * kRowBytes;
#pragma unroll
      for (int j = 0; j < (S::kRowChunks + 3) / 4; ++j) {
        const int c = part + 4 * j;
        if (c < S::kRowChunks) cp_async16(dst + 16 * c, src + 16 * c, ok);
      }
    } else {
      __nv_bfloat16* dst = kv_s + (i % kStages) * kTile * kStride + lr * kStride;
#pragma unroll
      for (int j = 0; j < kChunks / 4; ++j) {
        const int c = part + 4 * j;
        cp_async16(dst + c * 8, src + 16 * c, ok);
      }
    }
  };
  static_assert(kThreads == 4 * kTile && kChunks % 4 == 0, "load_tile's thread mapping");
  constexpr int kAhead = kPacked ? 2 : kStages - 1;  // tiles in flight before the loop
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {  // group 0 also holds Q
    if (i < nt) load_tile(i, entry_of(i));
    cp_async_commit();
  }
  int next_entry = entry_of(kAhead);

  const float sl2 = p.scale * kLog2e;
  float m0 = -INFINITY, m1 = -INFINITY;  // running row maxima (log2 units) of rows g and g + 8
  float l0 = 0.0f, l1 = 0.0f;            // this thread's share of the row sums
  float o[kNT][4];                       // O for rows g, g + 8 x value columns [kCols warp, + kCols)
#pragma unroll
  for (int j = 0; j < kNT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

  for (int i = 0; i < nt; ++i) {
    const __nv_bfloat16* kv;
    if constexpr (kPacked) {
      cp_async_wait<1>();  // tile i (and Q) landed for this thread; tile i + 1 may be in flight
      __syncthreads();     // ... for every thread; and every warp is done with the bf16 tile of tile i - 1
      dequant_row<kFormat>(stage_s + ((i & 1) * kTile + lr) * kRowBytes, kv_s + lr * kStride, part);
      __syncthreads();     // the bf16 tile complete; its staging buffer free
      if (i + 2 < nt) load_tile(i + 2, next_entry);
      cp_async_commit();
      next_entry = entry_of(i + 3);
      kv = kv_s;
    } else {
      kv = kv_s + (i % kStages) * kTile * kStride;
      cp_async_wait<kStages - 2>();  // tile i (and Q) landed for this thread; later ones may be in flight
      __syncthreads();               // ... for every thread; and every warp is done with tile i - 1's buffer
      if (i + kStages - 1 < nt) load_tile(i + kStages - 1, next_entry);  // into tile i - 1's buffer
      cp_async_commit();
      next_entry = entry_of(i + kStages);
    }
    // S = Q K^T over this warp's 8 tile rows: four independent accumulators (the k loop is otherwise one
    // chain of 36 dependent mma).
    // Fragments by ldmatrix: Q's A fragment (rows lane % 16, columns + 8 for lanes 16..31) one x4 per k step, K's
    // B fragments of two k steps in one x4 (tile rows 8 warp + lane % 8, column blocks lane / 8).
    float sa[4][4] = {};
    const uint32_t qa = smem_u32(q_s + (lane & 15) * kStride + (lane >> 4) * 8);
    const uint32_t kb = smem_u32(kv + (8 * warp + (lane & 7)) * kStride + (lane >> 3) * 8);
#pragma unroll
    for (int kk = 0; kk < kMlaHeadDim / 16; kk += 2) {
      uint32_t a0[4], a1[4], b[4];
      ldmatrix_x4(a0, qa + kk * 32);
      ldmatrix_x4(a1, qa + kk * 32 + 32);
      ldmatrix_x4(b, kb + kk * 32);
      mma_bf16(sa[kk & 3], a0[0], a0[1], a0[2], a0[3], b[0], b[1]);
      mma_bf16(sa[(kk + 1) & 3], a1[0], a1[1], a1[2], a1[3], b[2], b[3]);
    }
    float s[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) s[j] = (sa[0][j] + sa[1][j]) + (sa[2][j] + sa[3][j]);
    // Masked scores in log2 units: s[0], s[1] row g, s[2], s[3] row g + 8; columns 2 tq, 2 tq + 1 of the 8.
    const int col_pos = pos0 + i * kTile + 8 * warp + 2 * tq;
    float x[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = col_pos + (j & 1);
      x[j] = c < pos_end && c <= (j < 2 ? qpos0 : qpos1) ? s[j] * sl2 : -INFINITY;
    }
    float mx0 = fmaxf(x[0], x[1]), mx1 = fmaxf(x[2], x[3]);
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    if (tq == 0) {
      red[warp * kHeads + g] = mx0;
      red[warp * kHeads + g + 8] = mx1;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      mx0 = fmaxf(mx0, red[w * kHeads + g]);
      mx1 = fmaxf(mx1, red[w * kHeads + g + 8]);
    }
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    const float u0 = n0 == -INFINITY ? 0.0f : n0, u1 = n1 == -INFINITY ? 0.0f : n1;  // -inf - -inf guard
    const float a0 = exp2f(m0 - u0), a1 = exp2f(m1 - u1);
    m0 = n0;
    m1 = n1;
    const float p0 = exp2f(x[0] - u0), p1 = exp2f(x[1] - u0), p2 = exp2f(x[2] - u1), p3 = exp2f(x[3] - u1);
    l0 = l0 * a0 + p0 + p1;
    l1 = l1 * a1 + p2 + p3;
    *reinterpret_cast<uint32_t*>(p_s + g * kPStride + 8 * warp + 2 * tq) = pack_bf16(p0, p1);
    *reinterpret_cast<uint32_t*>(p_s + (g + 8) * kPStride + 8 * warp + 2 * tq) = pack_bf16(p2, p3);
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      o[j][0] *= a0;
      o[j][1] *= a0;
      o[j][2] *= a1;
      o[j][3] *= a1;
    }
    __syncthreads();  // P complete (and every warp past its read of `red`)
    // O += P V: A = P [16 x 32], B = V rows of the tile, this warp's 128 value columns.
    const uint32_t pa = smem_u32(p_s + (lane & 15) * kPStride + (lane >> 4) * 8);  // A fragments as for Q
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      const int k = kk * 16;
      uint32_t f[4];
      ldmatrix_x4(f, pa + k * 2);
      const uint32_t f0 = f[0], f1 = f[1], f2 = f[2], f3 = f[3];
      const __nv_bfloat16* vrow = kv + (k + (lane & 15)) * kStride + kCols * warp + (lane >> 4) * 8;
#pragma unroll
      for (int j = 0; j < kNT; j += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vrow + j * 8);
        mma_bf16(o[j], f0, f1, f2, f3, b[0], b[1]);
        mma_bf16(o[j + 1], f0, f1, f2, f3, b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();

  // Row sums: the quad sharing a row, then the four warps.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  __syncthreads();
  if (tq == 0) {
    red[warp * kHeads + g] = l0;
    red[warp * kHeads + g + 8] = l1;
  }
  __syncthreads();
  l0 = 0.0f;
  l1 = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    l0 += red[w * kHeads + g];
    l1 += red[w * kHeads + g + 8];
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  const int col = kCols * warp + 2 * tq;
  const bool ok0 = g < rows, ok1 = g + 8 < rows;
  if (p.num_splits == 1) {
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + (pair0 + g) * kMlaValueDim + col;
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      if (ok0) *reinterpret_cast<uint32_t*>(out + 8 * j) = pack_bf16(o[j][0] * inv0, o[j][1] * inv0);
      if (ok1) *reinterpret_cast<uint32_t*>(out + 8 * kMlaValueDim + 8 * j) = pack_bf16(o[j][2] * inv1, o[j][3] * inv1);
    }
  } else {
    const int64_t r0 = split * TH + pair0 + g, r1 = r0 + 8;
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      if (ok0) *reinterpret_cast<float2*>(p.part_o + r0 * kMlaValueDim + col + 8 * j) = make_float2(o[j][0] * inv0, o[j][1] * inv0);
      if (ok1) *reinterpret_cast<float2*>(p.part_o + r1 * kMlaValueDim + col + 8 * j) = make_float2(o[j][2] * inv1, o[j][3] * inv1);
    }
    if (warp == 0 && tq == 0) {
      if (ok0) p.part_lse[r0] = l0 > 0.0f ? m0 + log2f(l0) : -INFINITY;
      if (ok1) p.part_lse[r1] = l1 > 0.0f ? m1 + log2f(l1) : -INFINITY;
    }
  }
}

// Any query shape without top-k at the tensor-core dims; the bf16 dispatch adds its own limits
// (mla_decode_m16_supported).
bool m16_dims_fit(const MlaDecodeParams& p) {
  return p.topk == nullptr && p.num_heads >= 1 && p.head_dim == kMlaHeadDim && p.v_dim == kMlaValueDim &&
         p.page_size > 0 && p.max_q_len >= 1 && p.cache_format >= kKvBf16 && p.cache_format <= kKvE5M2;
}

}  // namespace

int mla_decode_m16_mode() {
  static const int mode = env_flag("DSERVE_MLA_M16", false) ? 1 : !env_flag("DSERVE_MLA_M16", true) ? 0 : -1;
  return mode;
}

bool mla_decode_m16_supported(const MlaDecodeParams& p) {
  const int mode = mla_decode_m16_mode();
  if (!m16_dims_fit(p)) return false;
  // Packed rows: whenever a sequence's query rows fit one block (the wgmma kernel's 64-row tiles take the rest).
  if (p.cache_format != kKvBf16) return mode != 0 && static_cast<int64_t>(p.max_q_len) * p.num_heads <= kHeads;
  if (mode == 0 || p.max_q_len != 1 || p.num_heads > kHeads) return false;
  if (mode == 1) return true;
  const int units = (p.plan_context + kUnit - 1) / kUnit;
  return p.plan_context >= 1 && (units + p.num_splits - 1) / std::max(p.num_splits, 1) <= kMlaM16MaxUnits;
}

template <int kTileRows, int kFormat>
cudaError_t launch_m16_variant(const MlaDecodeParams& p, cudaStream_t stream) {
  using S = Shape<kTileRows, kFormat>;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t attr = attrs.get([] {
    return cudaFuncSetAttribute(mla_decode_m16_kernel<kTileRows, kFormat>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                S::kSmemBytes);
  });
  if (attr != cudaSuccess) return attr;
  const int64_t row_blocks = (static_cast<int64_t>(p.max_q_len) * p.num_heads + kHeads - 1) / kHeads;
  if (row_blocks > INT32_MAX) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(p.num_splits),
                  static_cast<unsigned>(p.num_seqs));
  return launch_pdl(mla_decode_m16_kernel<kTileRows, kFormat>, grid, S::kThreads, S::kSmemBytes, stream, p);
}

cudaError_t launch_mla_decode_m16(const MlaDecodeParams& p, cudaStream_t stream) {
  if (!m16_dims_fit(p)) return cudaErrorInvalidValue;
  switch (p.cache_format) {
    case kKvE4M3: return launch_m16_variant<64, kKvE4M3>(p, stream);
    case kKvE5M2: return launch_m16_variant<64, kKvE5M2>(p, stream);
    default: return launch_m16_variant<64, kKvBf16>(p, stream);
  }
}

}  // namespace ds::kernels
