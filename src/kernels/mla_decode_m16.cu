// MLA absorbed decode for at most 16 query heads per sequence and one new token (V2-Lite, V3 heads split 8
// ways): the 16 heads are the M side of mma.sync m16n8k16 tiles, so no tensor work goes to padding rows (the
// wgmma kernel of mla_decode.cu computes 64 rows per tile, 48 of them empty at 16 heads). Block = (sequence,
// split), 8 warps; per 64-row cache tile: S = Q K^T (warp w: tile rows [8 w, 8 w + 8), K = 576, four
// independent accumulator chains), the online-softmax row max across warps through shared memory, P (bf16)
// through shared memory, then O += P V (warp w: value columns [64 w, 64 w + 64), B fragments by
// ldmatrix.trans). Two tile buffers: the next tile loads with cp.async while one is used (page-table entries
// read one tile ahead); rows are padded to 1168 bytes so every fragment load is free of bank conflicts. Same
// split and partial conventions as mla_decode.cu (its combine kernel merges the splits). Measured 32-row tiles
// with 4 warps and five buffers too: slower in every case (BENCHMARKS.md).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>

#include "kernels/mla_decode.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kHeads = 16;                 // the mma's M
constexpr int kUnit = 64;                  // the split plan's unit (mla_decode_num_splits)
constexpr int kStride = kMlaHeadDim + 8;   // bf16 per shared row: 1168 bytes, 292 words = 4 (mod 32) banks apart
constexpr int kChunks = kMlaHeadDim / 8;   // 16-byte chunks per row: 72
constexpr float kLog2e = 1.4426950408889634f;

// kTileRows cache rows per tile, one warp per 8 of them (Q K^T), the same warps splitting the 512 value columns
// (P V); 64-row tiles take two buffers (32-row ones, measured slower, five).
template <int kTileRows>
struct Shape {
  static constexpr int kTile = kTileRows;
  static constexpr int kWarps = kTileRows / 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStages = kTileRows == 32 ? 5 : 2;
  static constexpr int kCols = kMlaValueDim / kWarps;  // value columns per warp
  static constexpr int kNT = kCols / 8;                // n8 tiles per warp
  static constexpr int kPStride = kTile + 8;           // bf16 per P row (conflict-free fragment loads)
  static constexpr int kSmemQ = 0;
  static constexpr int kSmemKv = kSmemQ + kHeads * kStride * 2;
  static constexpr int kSmemP = kSmemKv + kStages * kTile * kStride * 2;
  static constexpr int kSmemRed = kSmemP + kHeads * kPStride * 2;  // float [warps][16 rows]
  static constexpr int kSmemBytes = kSmemRed + kWarps * kHeads * 4;
  static_assert(kSmemBytes <= 232448, "exceeds the 227 KB opt-in shared memory of sm_90");
};

__device__ __forceinline__ uint32_t ld32(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int kTileRows>
__global__ void __launch_bounds__(Shape<kTileRows>::kThreads, 1) mla_decode_m16_kernel(const MlaDecodeParams p) {
  using S = Shape<kTileRows>;
  constexpr int kTile = S::kTile, kWarps = S::kWarps, kThreads = S::kThreads, kStages = S::kStages;
  constexpr int kCols = S::kCols, kNT = S::kNT, kPStride = S::kPStride;
  constexpr int kSmemQ = S::kSmemQ, kSmemKv = S::kSmemKv, kSmemP = S::kSmemP, kSmemRed = S::kSmemRed;
  pdl_enter();
  extern __shared__ __align__(16) uint8_t smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem + kSmemQ);
  __nv_bfloat16* kv_s = reinterpret_cast<__nv_bfloat16*>(smem + kSmemKv);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + kSmemP);
  float* red = reinterpret_cast<float*>(smem + kSmemRed);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int seq = blockIdx.z, split = blockIdx.y, H = p.num_heads;
  const int t = p.q_starts[seq];
  if (p.q_starts[seq + 1] - t <= 0) return;
  const int kv_end = max(0, min(p.positions[t] + 1, p.seq_lens[seq]));
  const int n_units = (kv_end + kUnit - 1) / kUnit;
  const int per_split = (n_units + p.num_splits - 1) / p.num_splits;
  const int u_begin = split * per_split;
  const int n = max(0, min(n_units, u_begin + per_split) - u_begin);
  const int64_t TH = static_cast<int64_t>(p.num_tokens) * H;
  if (n == 0 && p.num_splits > 1) {  // a split past this context's end: only its log-sum-exp
    if (tid < H) p.part_lse[split * TH + static_cast<int64_t>(t) * H + tid] = -INFINITY;
    return;
  }
  const int pos0 = u_begin * kUnit;                              // first context position of this split
  const int pos_end = min(kv_end, (u_begin + n) * kUnit);
  const int nt = (pos_end - pos0 + kTile - 1) / kTile;           // tiles (0 only for an empty context)

  const __nv_bfloat16* cache = static_cast<const __nv_bfloat16*>(p.cache);
  const int32_t* btab = p.block_table + static_cast<int64_t>(seq) * p.max_pages;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) + static_cast<int64_t>(t) * H * kMlaHeadDim;
  // Rows beyond the context (and head rows beyond H) are zero-filled: no stale or NaN value is multiplied.
  for (int idx = tid; idx < kHeads * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    cp_async16(q_s + r * kStride + c * 8, q + static_cast<int64_t>(r < H ? r : 0) * kMlaHeadDim + c * 8, r < H);
  }
  // Four threads per tile row, 18 interleaved 16-byte chunks apiece. A row's page-table entry is read one
  // iteration before its tile is loaded (a dependent global read in front of the copies would stall the loop).
  const int lr = tid >> 2, part = tid & 3;
  auto entry_of = [&](int i) -> int {  // page of this thread's row of tile i, -1 beyond the split
    const int pos = pos0 + i * kTile + lr;
    return i < nt && pos < pos_end ? btab[pos / p.page_size] : -1;
  };
  auto load_tile = [&](int i, int entry) {
    __nv_bfloat16* dst = kv_s + (i % kStages) * kTile * kStride + lr * kStride;
    const int pos = pos0 + i * kTile + lr;
    const bool ok = entry >= 0;
    const int64_t slot = ok ? static_cast<int64_t>(entry) * p.page_size + pos % p.page_size : 0;
    const __nv_bfloat16* src = cache + slot * kMlaHeadDim;
#pragma unroll
    for (int j = 0; j < kChunks / 4; ++j) {
      const int c = part + 4 * j;
      cp_async16(dst + c * 8, src + c * 8, ok);
    }
  };
  static_assert(kThreads == 4 * kTile && kChunks % 4 == 0, "load_tile's thread mapping");
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {  // the first kStages - 1 tiles in flight (group 0 also holds Q)
    if (i < nt) load_tile(i, entry_of(i));
    cp_async_commit();
  }
  int next_entry = entry_of(kStages - 1);

  const float sl2 = p.scale * kLog2e;
  float m0 = -INFINITY, m1 = -INFINITY;  // running row maxima (log2 units) of rows g and g + 8
  float l0 = 0.0f, l1 = 0.0f;            // this thread's share of the row sums
  float o[kNT][4];                       // O for rows g, g + 8 x value columns [kCols warp, + kCols)
#pragma unroll
  for (int j = 0; j < kNT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

  for (int i = 0; i < nt; ++i) {
    const __nv_bfloat16* kv = kv_s + (i % kStages) * kTile * kStride;
    cp_async_wait<kStages - 2>();  // tile i (and Q) landed for this thread; later ones may be in flight
    __syncthreads();               // ... for every thread; and every warp is done with tile i - 1's buffer
    if (i + kStages - 1 < nt) load_tile(i + kStages - 1, next_entry);  // into tile i - 1's buffer
    cp_async_commit();
    next_entry = entry_of(i + kStages);
    // S = Q K^T over this warp's 8 tile rows: four independent accumulators (the k loop is otherwise one
    // chain of 36 dependent mma).
    float sa[4][4] = {};
    const __nv_bfloat16* qa = q_s + g * kStride + 2 * tq;
    const __nv_bfloat16* kb = kv + (8 * warp + g) * kStride + 2 * tq;
#pragma unroll
    for (int kk = 0; kk < kMlaHeadDim / 16; ++kk) {
      const int k = kk * 16;
      mma_bf16(sa[kk & 3], ld32(qa + k), ld32(qa + 8 * kStride + k), ld32(qa + k + 8),
               ld32(qa + 8 * kStride + k + 8), ld32(kb + k), ld32(kb + k + 8));
    }
    float s[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) s[j] = (sa[0][j] + sa[1][j]) + (sa[2][j] + sa[3][j]);
    // Masked scores in log2 units: s[0], s[1] row g, s[2], s[3] row g + 8; columns 2 tq, 2 tq + 1 of the 8.
    const int col_pos = pos0 + i * kTile + 8 * warp + 2 * tq;
    float x[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) x[j] = col_pos + (j & 1) < pos_end ? s[j] * sl2 : -INFINITY;
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
    const __nv_bfloat16* pa = p_s + g * kPStride + 2 * tq;
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      const int k = kk * 16;
      const uint32_t f0 = ld32(pa + k), f1 = ld32(pa + 8 * kPStride + k), f2 = ld32(pa + k + 8),
                     f3 = ld32(pa + 8 * kPStride + k + 8);
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
  const int h0 = g, h1 = g + 8;
  if (p.num_splits == 1) {
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + static_cast<int64_t>(t) * H * kMlaValueDim;
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      if (h0 < H)
        *reinterpret_cast<uint32_t*>(out + h0 * kMlaValueDim + col + 8 * j) = pack_bf16(o[j][0] * inv0, o[j][1] * inv0);
      if (h1 < H)
        *reinterpret_cast<uint32_t*>(out + h1 * kMlaValueDim + col + 8 * j) = pack_bf16(o[j][2] * inv1, o[j][3] * inv1);
    }
  } else {
    const int64_t row0 = split * TH + static_cast<int64_t>(t) * H + h0, row1 = row0 + 8;
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      if (h0 < H)
        *reinterpret_cast<float2*>(p.part_o + row0 * kMlaValueDim + col + 8 * j) = make_float2(o[j][0] * inv0, o[j][1] * inv0);
      if (h1 < H)
        *reinterpret_cast<float2*>(p.part_o + row1 * kMlaValueDim + col + 8 * j) = make_float2(o[j][2] * inv1, o[j][3] * inv1);
    }
    if (warp == 0 && tq == 0) {
      if (h0 < H) p.part_lse[row0] = l0 > 0.0f ? m0 + log2f(l0) : -INFINITY;
      if (h1 < H) p.part_lse[row1] = l1 > 0.0f ? m1 + log2f(l1) : -INFINITY;
    }
  }
}

bool m16_shape_fits(const MlaDecodeParams& p) {
  return p.topk == nullptr && p.max_q_len == 1 && p.num_heads >= 1 && p.num_heads <= kHeads &&
         p.head_dim == kMlaHeadDim && p.v_dim == kMlaValueDim && p.page_size > 0;
}

}  // namespace

bool mla_decode_m16_supported(const MlaDecodeParams& p) {
  static const int mode = [] {  // -1: by plan context, 0: never, 1: whenever the shape fits
    const char* e = std::getenv("DSERVE_MLA_M16");
    return e && *e ? (e[0] == '0' ? 0 : 1) : -1;
  }();
  if (mode == 0 || !m16_shape_fits(p)) return false;
  if (mode == 1) return true;
  const int units = (p.plan_context + kUnit - 1) / kUnit;
  return p.plan_context >= 1 && (units + p.num_splits - 1) / std::max(p.num_splits, 1) <= kMlaM16MaxUnits;
}

template <int kTileRows>
cudaError_t launch_m16_variant(const MlaDecodeParams& p, cudaStream_t stream) {
  using S = Shape<kTileRows>;
  static const cudaError_t attr = cudaFuncSetAttribute(mla_decode_m16_kernel<kTileRows>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(1, static_cast<unsigned>(p.num_splits), static_cast<unsigned>(p.num_seqs));
  return launch_pdl(mla_decode_m16_kernel<kTileRows>, grid, S::kThreads, S::kSmemBytes, stream, p);
}

cudaError_t launch_mla_decode_m16(const MlaDecodeParams& p, cudaStream_t stream) {
  if (!m16_shape_fits(p)) return cudaErrorInvalidValue;
  return launch_m16_variant<64>(p, stream);
}

}  // namespace ds::kernels
