// MLA prefill attention in MHA form on Hopper's wgmma (see mla_prefill.h; same semantics as the mma.sync kernel):
// one block of two warpgroups per (128 query rows, head, sequence), each warpgroup owning 64 rows. S = Q K^T as
// m64n64k16 or m64n128k16 (64- or 128-key tiles) with Q and the key tile K-major in shared memory (128-byte swizzle),
// the online softmax in fp32 registers, then O += P V as m64n128k16 with P taken straight from the S accumulators as
// the register A operand and the value tile MN-major. Key / value tiles stream through a ring of cp.async stages
// (three of 64 keys, two of 128); the row tiles run longest first (the causal tail). Measured and removed (session 61,
// BENCHMARKS.md): the next tile's S issued before this tile's softmax (a tie), one warpgroup a block at two blocks an
// SM (0.68x).
#include <cuda_bf16.h>

#include "kernels/mla_prefill.h"
#include "kernels/pdl.cuh"
#include "kernels/per_device.h"
#include "kernels/ptx.cuh"
#include "kernels/wgmma.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kNope = 128, kQk = 192, kV = 128;  // qk = nope + rope (64)
constexpr int kQkChunks = kQk / 8;  // 16-byte chunks of a Q / K row: 24 (three 128-byte panels)
constexpr int kVChunks = kV / 8;    // 16 (two panels)
constexpr int kQWgBytes = 3 * 64 * 128;  // a warpgroup's 64 Q rows: three panels of 64 rows x 128 B
constexpr int kThreads = 256;            // two warpgroups
constexpr int kBq = 128;                 // query rows a block, 64 a warpgroup (the wgmma M)
constexpr int kSmemKv = 2 * kQWgBytes;   // key / value stages after Q (48 KB)
// Keys a tile BK (64 or 128): the key tile is three panels of BK rows, the value tile two.
template <int BK>
struct Tiles {
  static constexpr int kPanel = BK * 128;
  static constexpr int kKBytes = 3 * kPanel, kVBytes = 2 * kPanel, kStageBytes = kKBytes + kVBytes;  // 40 / 80 KB
  static constexpr int kStages = BK == 64 ? 3 : 2;
  static constexpr int kSmemBytes = kSmemKv + kStages * kStageBytes + 1024;  // + alignment slack: 169 / 209 KB
  static_assert(kSmemBytes <= 232448, "exceeds the 227 KB opt-in shared memory of sm_90");
};
constexpr float kLog2e = 1.4426950408889634f;

// Byte offset of 16-byte chunk c of row r in a [panels][rows][128 B] tile (panel = rows x 128 B), 128-byte swizzle:
// the layout wgmma reads for K-major and MN-major operands alike.
__device__ __forceinline__ uint32_t tile_offset(int r, int c, int panel) {
  return (c >> 3) * panel + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// D[64 x 64] (+)= A[64 x 16] B[16 x 64], A and B K-major in shared memory.
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x 128] (+)= A[64 x 16] B[16 x 128], A and B K-major in shared memory (128-key tiles).
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x 128] += A[64 x 16] B[16 x 128], A in registers (the m16n8k16 A fragment of each warp's 16 rows), B MN-major
// (rows of contiguous columns) in shared memory.
__device__ __forceinline__ void wgmma_m64n128k16_rs_tnsp_b(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
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

// kSplitLoads (opt-in, session 61, not yet measured): the key / value tile loaded as three loops whose thread -> (row,
// chunk) maps are shifts (k_nope with v, then the rope key), instead of one loop over 40 chunks a row with a division,
// a remainder and three branches that split warps (ncu, s61g: ALU the busiest pipe at 28%, 20 of 32 threads active).
template <int BK, bool kSplitLoads = false>
__global__ void __launch_bounds__(kThreads, 1) mla_prefill_wgmma_kernel(const MlaPrefillParams p) {
  using T = Tiles<BK>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_align1024(smem_raw);
  const uint32_t sbase = smem_u32(smem);
  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // the longest row tiles first
  const int h = blockIdx.y, seq = blockIdx.z;
  const int q0 = p.q_starts[seq];
  const int qn = p.q_starts[seq + 1] - q0;
  if (qt * kBq >= qn) return;  // block-uniform
  const int64_t cb = context_base(p.seq_lens, seq);
  const int seq_len = p.seq_lens[seq];
  const int H = p.num_heads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int row_first = qt * kBq;
  const int kv_end = min(seq_len, p.positions[q0 + min(row_first + kBq - 1, qn - 1)] + 1);
  const int n_kt = (max(kv_end, 0) + BK - 1) / BK;
  const int first_pos = p.positions[q0 + row_first];  // rows of a sequence hold increasing positions

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
    if constexpr (kSplitLoads) {
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
    } else {
      for (int idx = tid; idx < BK * (kQkChunks + kVChunks); idx += kThreads) {
        const int r = idx / (kQkChunks + kVChunks), c = idx % (kQkChunks + kVChunks);
        const int j = kt * BK + r;
        const bool ok = j < kv_end;
        const int64_t row = cb + (ok ? j : 0);
        const __nv_bfloat16* kvrow = kv + (row * H + h) * (kNope + kV);
        if (c < kNope / 8) {
          cp_async16(dk + tile_offset(r, c, T::kPanel), ok ? kvrow + c * 8 : kv, ok);
        } else if (c < kQkChunks) {
          cp_async16(dk + tile_offset(r, c, T::kPanel),
                     ok ? ctx + row * p.ctx_dim + p.rope_offset + (c - kNope / 8) * 8 : ctx, ok);
        } else {
          const int cv = c - kQkChunks;
          cp_async16(dv + tile_offset(r, cv, T::kPanel), ok ? kvrow + kNope + cv * 8 : kv, ok);
        }
      }
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
      if constexpr (BK == 64)
        wgmma_m64n64k16_ss(sn, dq + off_q, dk + off_k, k > 0);
      else
        wgmma_m64n128k16_ss(sn, dq + off_q, dk + off_k, k > 0);
    }
    wgmma_commit();
  };

  // One tile: S(kt) issued and waited -> masked online softmax -> O += P V(kt) waited. Stage reuse: tile
  // kt + kStages - 1 goes into tile kt - 1's stage once every thread has waited for its wgmma.
  const auto step = [&](int kt) {
    cp_async_wait<T::kStages - 2>();  // tile kt landed for this thread
    fence_proxy_async();
    __syncthreads();  // ... for every thread; both warpgroups done with tile kt - 1's stage
    if (kt + T::kStages - 1 < n_kt) load_tile(kt + T::kStages - 1);
    cp_async_commit();
    issue_qk(kt);
    wgmma_wait<0>();
    fence_regs(sn);
    float s[BK / 2];
#pragma unroll
    for (int i = 0; i < BK / 2; ++i) s[i] = sn[i];

    // Mask (context end, causality, DSA bits) where the tile reaches past the block's first row, then the online
    // softmax in log2 units.
    const int j_first = kt * BK;
    const bool masked = p.allow != nullptr || j_first + BK - 1 > first_pos || j_first + BK > kv_end;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < BK / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& a = s[4 * j + e];
        float& b = s[4 * j + 2 + e];
        if (masked) {
          const int col = j_first + 8 * j + 2 * (lane & 3) + e;
          const bool in = col < kv_end;
          const bool va =
              in && col <= pos0 &&
              (!p.allow || ((p.allow[static_cast<int64_t>(t0) * p.allow_words + (col >> 5)] >> (col & 31)) & 1u));
          const bool vb =
              in && col <= pos1 &&
              (!p.allow || ((p.allow[static_cast<int64_t>(t1) * p.allow_words + (col >> 5)] >> (col & 31)) & 1u));
          a = va ? a * sl2 : -INFINITY;
          b = vb ? b * sl2 : -INFINITY;
        } else {
          a *= sl2;
          b *= sl2;
        }
        mx0 = fmaxf(mx0, a);
        mx1 = fmaxf(mx1, b);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
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
      const float p00 = fast_exp2(s[4 * j] - b0), p01 = fast_exp2(s[4 * j + 1] - b0);
      const float p10 = fast_exp2(s[4 * j + 2] - b1), p11 = fast_exp2(s[4 * j + 3] - b1);
      l0 += p00 + p01;
      l1 += p10 + p11;
      pf[j >> 1][(j & 1) * 2] = pack_bf16(p00, p01);
      pf[j >> 1][(j & 1) * 2 + 1] = pack_bf16(p10, p11);
    }

    const uint64_t dv = opaque(make_desc(stage_of(kt) + T::kKBytes, T::kPanel, 1024));
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k) wgmma_m64n128k16_rs_tnsp_b(o, pf[k], dv + ((k * 16 * 128) >> 4));
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
  };

  // Prologue: Q with tile 0 in the first group, tiles 1 .. kStages - 2 one group each.
#pragma unroll
  for (int i = 0; i < T::kStages - 1; ++i) {
    if (i < n_kt) load_tile(i);
    cp_async_commit();
  }
  for (int kt = 0; kt < n_kt; ++kt) step(kt);
  wgmma_wait<0>();
  fence_regs(o);
  cp_async_wait<0>();

  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out);
  const int col = 2 * (lane & 3);
  if (pos0 >= 0) {
    const float inv = l0 > 0.0f ? 1.0f / l0 : 0.0f;
    __nv_bfloat16* dst = out + (static_cast<int64_t>(t0) * H + h) * kV + col;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack_bf16(o[4 * j] * inv, o[4 * j + 1] * inv);
  }
  if (pos1 >= 0) {
    const float inv = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    __nv_bfloat16* dst = out + (static_cast<int64_t>(t1) * H + h) * kV + col;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack_bf16(o[4 * j + 2] * inv, o[4 * j + 3] * inv);
  }
}

template <int BK, bool kSplitLoads>
cudaError_t launch_bk(const MlaPrefillParams& p, cudaStream_t stream) {
  static PerDevice<cudaError_t> attrs;
  const cudaError_t e = attrs.get([] {
    return cudaFuncSetAttribute(mla_prefill_wgmma_kernel<BK, kSplitLoads>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                Tiles<BK>::kSmemBytes);
  });
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((p.max_q_len + kBq - 1) / kBq), static_cast<unsigned>(p.num_heads),
                  static_cast<unsigned>(p.num_seqs));
  return launch_plain(mla_prefill_wgmma_kernel<BK, kSplitLoads>, grid, kThreads, Tiles<BK>::kSmemBytes, stream, p);
}

}  // namespace

cudaError_t launch_mla_prefill_wgmma(const MlaPrefillParams& p, cudaStream_t stream, int keys_per_tile,
                                     bool split_loads) {
  if (p.num_tokens == 0 || p.num_seqs == 0 || p.max_q_len == 0) return cudaSuccess;
  if (!mla_prefill_fast_supported(p.nope, p.rope, p.v, p.ctx_dim, p.rope_offset)) return cudaErrorInvalidValue;
  if (keys_per_tile == 64) return split_loads ? launch_bk<64, true>(p, stream) : launch_bk<64, false>(p, stream);
  if (keys_per_tile == 128) return split_loads ? launch_bk<128, true>(p, stream) : launch_bk<128, false>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace ds::kernels
