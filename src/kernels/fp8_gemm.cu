// Block-FP8 kernels (see fp8_gemm.h): activation quantization and the small-M tensor-core GEMM.
#include "kernels/fp8_gemm.h"
#include "kernels/per_device.h"

#include "core/env.h"
#include "kernels/fp8_quant.cuh"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

#include <cstdlib>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace ds::kernels {
namespace {

using ptx::load_stream;
using ptx::mma_e4m3;

// One warp per (token, 128-group); each lane owns 4 consecutive channels. Pad rows (m >= M) quantize zeros.
// kSilu (p.silu): the 4 values are silu_mul's of the row's gate and up (launch checks K == Kp, no pad rows).
template <bool kSilu>
__global__ void quant_act_kernel(Fp8QuantParams p) {
  pdl_enter();
  const int64_t groups = p.Kp / 128;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (warp >= max(p.M, p.M_pad) * groups) return;
  const int64_t m = warp / groups, g = warp % groups;
  float v[4];
  if constexpr (kSilu) {
    // 8-byte loads of 4 gates and 4 ups; the product rounded to bf16 exactly as silu_mul_kernel does.
    const __nv_bfloat16* row = static_cast<const __nv_bfloat16*>(p.x) + m * p.ldx + g * 128 + lane * 4;
    const uint2 gv = *reinterpret_cast<const uint2*>(row), uv = *reinterpret_cast<const uint2*>(row + p.up_off);
    const __nv_bfloat16* g4 = reinterpret_cast<const __nv_bfloat16*>(&gv);
    const __nv_bfloat16* u4 = reinterpret_cast<const __nv_bfloat16*>(&uv);
    uint2 o;
    __nv_bfloat16* o4 = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float gf = __bfloat162float(g4[j]), uf = __bfloat162float(u4[j]);
      o4[j] = __float2bfloat16(gf / (1.0f + expf(-gf)) * uf);
      v[j] = __bfloat162float(o4[j]);
    }
    if (p.silu_out)
      *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p.silu_out) + m * p.K + g * 128 + lane * 4) = o;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t k = g * 128 + lane * 4 + j;
      float x = 0.0f;
      if (k < p.K && m < p.M) {
        x = p.x_f32 ? static_cast<const float*>(p.x)[m * p.ldx + k]
                    : __bfloat162float(static_cast<const __nv_bfloat16*>(p.x)[m * p.ldx + k]);
      }
      v[j] = x;  // columns K..Kp stay zero: e4m3(0) = 0
    }
  }
  uint32_t packed;
  const float s = fp8::quantize_group_warp(v, p.ue8m0, &packed);
  reinterpret_cast<uint32_t*>(p.q + m * p.Kp + g * 128)[lane] = packed;
  if (lane == 0) p.s[p.s_m_major ? g * p.s_ld + m : m * p.s_ld + g] = s;
}

constexpr int kWarps = 8;

// Up to two independent problems in one launch (blocks [0, split) run p[0], the rest p[1]).
struct SmallMLaunch {
  Fp8GemmSmallMParams p[2];
  int64_t split = 0;
  bool early = false;  // an early trigger (pdl.cuh pdl_early: the pair launch)
};

// CTA = 16 weight rows (the mma's M side) x all tokens (NT tiles of 8 on the mma's N side); its 8 warps split
// the K blocks and reduce through shared memory. Within a 128-deep K block a lane streams bytes [16 tig, +16)
// and [64 + 16 tig, +16) of weight rows g and g + 8 (g = lane / 4) and of token g, so each 16-byte load
// instruction covers 64 contiguous bytes of a row (whole sectors; see moe_fp8.cu); the k order inside the
// block is permuted the same way for both operands, so each mma still sums matching products. Per block:
// partial (fp32) * sx * sw, as the reference does.
// kSilu: the 16 rows are gate rows n0..n0+7 and their up rows up_row + n0.., so a lane holds gate and up of the
// same output column. kFusedQuant (NT = 1): the warp quantizes each token's 128-group of x itself, exactly as
// quant_act_kernel does (fp8::quantize_group_warp, lane l holding channels 4l..4l+3), and hands each lane the
// bytes its mma slot takes by shuffles.
// kStageU > 0 (the default at <= 16 tokens; DSERVE_FP8_STAGED=0 restores the register kernels; NT <= 2): the
// weights go through shared memory instead of registers, kStageU K blocks per warp per round (kStageU x 16 KB a
// CTA), and the first round is issued before the PDL wait; each lane reads back only the 16-byte slots it copied
// itself, so no barrier. With the weights out of the registers the CTA is small enough that the next kernel's CTAs
// fit beside it and can do the same (the bf16 small-M kernels' pre-wait staging, kernels/gemm_small_m.cu, gained
// 0.07 ms a step that way; here V2-Lite --quantization fp8 batch 1 2.66-2.68 vs 2.72-2.73 ms, H100 2026-11-27).
template <int NT, bool kFusedQuant, bool kSilu, int kStageU = 0>
__global__ void __launch_bounds__(kWarps * 32) gemm_small_m_kernel(const SmallMLaunch launch) {
  static_assert(!kFusedQuant || NT == 1, "in-kernel quantization takes at most 8 tokens");
  static_assert(kStageU == 0 || NT <= 2, "staged rounds hold each block's activations in registers");
  __shared__ float red[kWarps][NT * 4][32];
  extern __shared__ uint4 fp8_stage[];  // kStageU: [warp][kStageU blocks][4 slots][32 lanes]
  if (launch.early) pdl_launch_dependents();
  const bool second = blockIdx.x >= launch.split;
  const Fp8GemmSmallMParams& p = launch.p[second ? 1 : 0];
  const int64_t bx = second ? blockIdx.x - launch.split : blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  const int64_t n0 = bx * (kSilu ? 8 : 16);
  const int64_t r1 = kSilu ? p.up_row + n0 : n0 + 8;  // first row of the second 8-row half
  const int64_t kblocks = p.Kp / 128;
  // Batch b = blockIdx.y (per-head products): its operands sit b * batch_* elements further on.
  const int64_t b = blockIdx.y;
  const uint8_t* wb = p.w + b * p.batch_w;
  const uint8_t* qb = p.q + b * p.batch_q;
  const float* sxb = p.sx + b * p.batch_sx;
  const int64_t ldq = p.ldq > 0 ? p.ldq : p.Kp;
  const float* sw_row0 = p.sw + b * p.batch_sw + (n0 / 128) * kblocks;
  const float* sw_row1 = p.sw + b * p.batch_sw + (r1 / 128) * kblocks;
  const uint8_t* w0 = wb + (n0 + g) * p.Kp + tig * 16;
  const uint8_t* w1 = wb + (r1 + g) * p.Kp + tig * 16;
  // Weights are never written during a forward: pull this CTA's 16 rows (inside the zero-padded Np; only their
  // first blocks with prefetch_first) into L2 while the previous kernel of the stream finishes (pdl.cuh), then
  // wait for it before reading q, sx or x.
  auto row_of = [&](int r) { return r < 8 ? n0 + r : r1 + (r - 8); };
  uint4* my = fp8_stage + warp * kStageU * 4 * 32 + lane;  // kStageU: this lane's slot 0 (slot s at my[s * 32])
  // kStageU: one round's weight copies of this warp (blocks c0, c0 + kWarps, ...), as one commit group.
  auto issue_round = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kStageU; ++u) {
      const int64_t kb = c0 + u * kWarps;
      const bool in = kb < kblocks;
      const int64_t off = (in ? kb : 0) * 128;
      ptx::cp_async16_weight(&my[(u * 4 + 0) * 32], w0 + off, in);
      ptx::cp_async16_weight(&my[(u * 4 + 1) * 32], w0 + off + 64, in);
      ptx::cp_async16_weight(&my[(u * 4 + 2) * 32], w1 + off, in);
      ptx::cp_async16_weight(&my[(u * 4 + 3) * 32], w1 + off + 64, in);
    }
    ptx::cp_async_commit();
  };
  if constexpr (kStageU > 0) {
    issue_round(warp);
    // The blocks past the first round into L2 (whole-slice mode only).
    if (!p.prefetch_first)
      for (int r = warp; r < 16; r += kWarps)
        for (int64_t off = (lane + kStageU * kWarps) * 128; off < p.Kp; off += 32 * 128)
          asm volatile("prefetch.global.L2 [%0];\n" ::"l"(wb + row_of(r) * p.Kp + off));
  } else if (!p.prefetch_first) {
    for (int r = warp; r < 16; r += kWarps)
      for (int64_t off = lane * 128; off < p.Kp; off += 32 * 128)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(wb + row_of(r) * p.Kp + off));
  } else {
    // The two blocks this warp loads first (kb = warp, warp + kWarps) of the 16 rows: lane = row + 16 x which.
    const int64_t kb = warp + (lane >> 4) * kWarps;
    if (kb < kblocks) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(wb + row_of(lane & 15) * p.Kp + kb * 128));
  }
  // And the CTA's scale rows (kblocks floats each), read once per K block below.
  if (warp == kWarps - 1)
    for (int64_t kb = lane * 32; kb < kblocks; kb += 32 * 32) {
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(sw_row0 + kb));
      if (kSilu) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(sw_row1 + kb));
    }
  pdl_enter();

  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[t][c] = 0.0f;

  // One 128-deep K block: this lane's 32 bytes of weight rows g and g + 8 (w[0..1] and w[2..3]).
  auto load_block = [&](int64_t kb, uint4 (&w)[4]) {
    const int64_t off = kb * 128;
    w[0] = load_stream(w0 + off);
    w[1] = load_stream(w0 + off + 64);
    w[2] = load_stream(w1 + off);
    w[3] = load_stream(w1 + off + 64);
  };
  // A block's activations and scales: this lane's 32 bytes of token t * 8 + g, the weight scales of the two row
  // halves, and the activation scales of tokens t * 8 + 2 tig + {0, 1} (loaded together with the weights:
  // loaded after them, each is another round trip).
  struct Act {
    uint4 q[NT][2];
    float sx[NT][2];
    float sw0, sw1;
  };
  auto load_scales = [&](int64_t kb, float& sw0, float& sw1) {
    sw0 = __ldg(sw_row0 + kb);
    sw1 = kSilu ? __ldg(sw_row1 + kb) : sw0;
  };
  auto load_act = [&](int64_t kb, Act& a) {
    const int64_t off = kb * 128;
    load_scales(kb, a.sw0, a.sw1);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int64_t m = t * 8 + g;  // the token this lane loads (B operand column g)
      a.q[t][0] = a.q[t][1] = make_uint4(0, 0, 0, 0);
      if (m < p.M) {
        const uint4* qp = reinterpret_cast<const uint4*>(qb + m * ldq + off + tig * 16);
        a.q[t][0] = __ldg(qp);
        a.q[t][1] = __ldg(qp + 4);
      }
      const int64_t m0 = t * 8 + tig * 2;
      a.sx[t][0] = m0 < p.M ? __ldg(sxb + m0 * p.sx_ld + kb) : 0.0f;
      a.sx[t][1] = m0 + 1 < p.M ? __ldg(sxb + (m0 + 1) * p.sx_ld + kb) : 0.0f;
    }
  };
  // kFusedQuant: a block's raw activations, channels 4 lane .. 4 lane + 3 of every token (bf16, zero past K),
  // loaded with the weights and quantized when the block is multiplied.
  struct Raw {
    uint2 x[8];
    float sw0, sw1;
  };
  const __nv_bfloat16* xb = static_cast<const __nv_bfloat16*>(p.x);
  auto load_raw = [&](int64_t kb, Raw& r) {
    load_scales(kb, r.sw0, r.sw1);
    const int64_t k = kb * 128 + 4 * lane;
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      r.x[m] = make_uint2(0, 0);
      if (m < p.M && k < p.K) r.x[m] = __ldg(reinterpret_cast<const uint2*>(xb + m * p.ldx + k));
    }
  };
  auto quantize = [&](const Raw& r, Act& a) {
    a.sw0 = r.sw0;
    a.sw1 = r.sw1;
    a.q[0][0] = a.q[0][1] = make_uint4(0, 0, 0, 0);
    a.sx[0][0] = a.sx[0][1] = 0.0f;
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      if (m >= p.M) break;  // warp-uniform
      const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&r.x[m].x);
      const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&r.x[m].y);
      const float v[4] = {__low2float(lo), __high2float(lo), __low2float(hi), __high2float(hi)};
      uint32_t packed;
      const float sc = fp8::quantize_group_warp(v, p.ue8m0, &packed);
      // Lane (g, tig) takes bytes [16 tig, +16) = lanes 4 tig .. 4 tig + 3 and [64 + 16 tig, +16) = lanes
      // 16 + 4 tig ..; only the lanes of token m (g == m) keep them.
      uint32_t w[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[j] = __shfl_sync(0xffffffffu, packed, 4 * tig + j);
        w[4 + j] = __shfl_sync(0xffffffffu, packed, 16 + 4 * tig + j);
      }
      if (g == m) {
        a.q[0][0] = make_uint4(w[0], w[1], w[2], w[3]);
        a.q[0][1] = make_uint4(w[4], w[5], w[6], w[7]);
      }
      if (2 * tig == m) a.sx[0][0] = sc;
      if (2 * tig + 1 == m) a.sx[0][1] = sc;
    }
  };
  auto compute_block = [&](const uint4 (&w)[4], const Act& a) {
    const uint32_t r[8] = {w[0].x, w[0].y, w[0].z, w[0].w, w[1].x, w[1].y, w[1].z, w[1].w};
    const uint32_t s[8] = {w[2].x, w[2].y, w[2].z, w[2].w, w[3].x, w[3].y, w[3].z, w[3].w};
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const uint4 qa = a.q[t][0], qb = a.q[t][1];
      const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < 4; ++j) mma_e4m3(part, r[2 * j], s[2 * j], r[2 * j + 1], s[2 * j + 1], q[2 * j], q[2 * j + 1]);
      // C fragment: part[0..1] = rows g, tokens 2 tig + {0, 1}; part[2..3] = rows g + 8, same tokens.
      const float sx0 = a.sx[t][0], sx1 = a.sx[t][1];
      acc[t][0] += part[0] * sx0 * a.sw0;
      acc[t][1] += part[1] * sx1 * a.sw0;
      acc[t][2] += part[2] * sx0 * a.sw1;
      acc[t][3] += part[3] * sx1 * a.sw1;
    }
  };
  // Double-buffered K loop: the next block's weights and activation state (S) in flight while this one is
  // multiplied; load(kb, state) issues a state's loads, act(state) gives the block's Act.
  auto pipelined = [&](auto load, auto act, auto state_type) {
    using S = decltype(state_type);
    uint4 cur[4], nxt[4];
    S scur, snxt;
    int64_t kb = warp;
    if (kb < kblocks) {
      load_block(kb, cur);
      load(kb, scur);
    }
    for (; kb < kblocks; kb += kWarps) {
      const bool more = kb + kWarps < kblocks;
      if (more) {
        load_block(kb + kWarps, nxt);
        load(kb + kWarps, snxt);
      }
      compute_block(cur, act(scur));
      if (more) {
#pragma unroll
        for (int i = 0; i < 4; ++i) cur[i] = nxt[i];
        scur = snxt;
      }
    }
  };
  if constexpr (kStageU > 0) {
    // Rounds: this round's weights (round 0's issued before the wait) and activations in flight together, then
    // multiplied block by block from shared memory.
    // The fused quantization runs as soon as a block's activations arrive (the weights are still in flight), so
    // only the quantized form stays in registers.
    for (int64_t c0 = warp; c0 < kblocks; c0 += kWarps * kStageU) {
      if (c0 != warp) issue_round(c0);
      Act st[kStageU];
#pragma unroll
      for (int u = 0; u < kStageU; ++u) {
        const int64_t kb = c0 + u * kWarps;
        if (kb >= kblocks) break;  // warp-uniform
        if constexpr (kFusedQuant) {
          Raw r;
          load_raw(kb, r);
          quantize(r, st[u]);
        } else {
          load_act(kb, st[u]);
        }
      }
      ptx::cp_async_wait<0>();
#pragma unroll
      for (int u = 0; u < kStageU; ++u) {
        if (c0 + u * kWarps >= kblocks) break;  // warp-uniform
        uint4 w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = my[(u * 4 + j) * 32];
        compute_block(w, st[u]);
      }
    }
  } else if constexpr (kFusedQuant) {
    // Raw activations in flight, quantized when their block is multiplied.
    pipelined(load_raw, [&](const Raw& r) {
      Act a;
      quantize(r, a);
      return a;
    }, Raw{});
  } else if constexpr (NT <= 2) {
    // Few tokens: registers to spare, so keep the next block in flight while computing this one (twice the
    // bytes in flight per warp; decode GEMMs are latency/bandwidth bound).
    pipelined(load_act, [](const Act& a) -> const Act& { return a; }, Act{});
  } else {
    for (int64_t kb = warp; kb < kblocks; kb += kWarps) {
      uint4 w[4];
      Act a;
      load_block(kb, w);
      load_act(kb, a);
      compute_block(w, a);
    }
  }

#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[warp][t * 4 + c][lane] = acc[t][c];
  __syncthreads();
  __nv_bfloat16* d = static_cast<__nv_bfloat16*>(p.d) + b * p.batch_d;
  if constexpr (kSilu) {
    // c in {0, 1}: gate (row g) and, in fragment slot c + 2, its up row; output column n0 + g.
    for (int idx = threadIdx.x; idx < NT * 2 * 32; idx += kWarps * 32) {
      const int t = idx / 64, c = (idx / 32) % 2, l = idx % 32;
      float gate = 0.0f, up = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) gate += red[w][t * 4 + c][l], up += red[w][t * 4 + c + 2][l];
      const int64_t n = n0 + (l >> 2);
      const int64_t m = t * 8 + (l & 3) * 2 + c;
      if (m < p.M && n < p.N) d[m * p.ldd + n] = __float2bfloat16(gate / (1.0f + expf(-gate)) * up);
    }
  } else {
    for (int idx = threadIdx.x; idx < NT * 4 * 32; idx += kWarps * 32) {
      const int tc = idx / 32, l = idx % 32;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += red[w][tc][l];
      const int t = tc / 4, c = tc % 4;
      const int64_t n = n0 + (l >> 2) + (c >= 2 ? 8 : 0);
      const int64_t m = t * 8 + (l & 3) * 2 + (c & 1);
      if (m < p.M && n < p.N) d[m * p.ldd + n] = __float2bfloat16(sum);
    }
  }
}

// 32x32 tiles through shared memory (+1 column against bank conflicts); 32 x 8 threads, 4 rows each.
__global__ void transpose_bf16_kernel(TransposeBf16Params p) {
  __shared__ __nv_bfloat16 tile[32][33];
  const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(p.src);
  __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(p.dst);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 32, c0 = static_cast<int64_t>(blockIdx.x) * 32;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < p.rows && c < p.cols) tile[i][threadIdx.x] = src[r * p.cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;  // dst row c, column r
    if (r < p.rows && c < p.cols) dst[c * p.rows + r] = tile[threadIdx.x][i];
  }
}

}  // namespace

cudaError_t launch_transpose_bf16(const TransposeBf16Params& p, cudaStream_t stream) {
  if (p.rows < 0 || p.cols < 0) return cudaErrorInvalidValue;
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  const int64_t gy = (p.rows + 31) / 32, gx = (p.cols + 31) / 32;
  if (gy > 65535 || gx > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_plain(transpose_bf16_kernel, dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(32, 8), 0,
                      stream, p);
}

bool fp8_quant_act_silu_supported(const Fp8QuantParams& p) {
  const auto misaligned = [](const void* a) { return (reinterpret_cast<uintptr_t>(a) & 7) != 0; };
  return p.silu && p.x && !p.x_f32 && p.K > 0 && p.K % 128 == 0 && p.Kp == p.K && p.M_pad <= p.M &&
         p.ldx % 4 == 0 && p.up_off % 4 == 0 && p.up_off >= p.K && p.ldx >= p.up_off + p.K && !misaligned(p.x) &&
         !misaligned(p.silu_out);
}

cudaError_t launch_fp8_quant_act(const Fp8QuantParams& p, cudaStream_t stream) {
  if (p.Kp % 128 != 0 || p.Kp < p.K || p.M < 0 || (p.silu && !fp8_quant_act_silu_supported(p)))
    return cudaErrorInvalidValue;
  const int64_t rows = p.M_pad > p.M ? p.M_pad : p.M;
  if (rows == 0) return cudaSuccess;
  const int64_t warps = rows * (p.Kp / 128);
  const int64_t threads = 256;
  const int64_t blocks = (warps * 32 + threads - 1) / threads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_pdl(p.silu ? quant_act_kernel<true> : quant_act_kernel<false>, dim3(static_cast<unsigned>(blocks)),
                    dim3(threads), 0, stream, p);
}

bool fp8_gemm_small_m_supported(const Fp8GemmSmallMParams& p) {
  if (p.M < 0 || p.M > kFp8SmallMMax || p.Np % 128 != 0 || p.Kp % 128 != 0 || p.N > p.Np || p.Kp == 0) return false;
  if (reinterpret_cast<uintptr_t>(p.w) % 16 != 0 || !p.d || !p.sw) return false;
  if (p.x) {
    if (p.M > 8 || p.K <= 0 || p.K > p.Kp || p.K % 4 != 0 || p.ldx % 4 != 0 || p.ldx < p.K ||
        reinterpret_cast<uintptr_t>(p.x) % 8 != 0)
      return false;
  } else if (!p.q || !p.sx || reinterpret_cast<uintptr_t>(p.q) % 16 != 0) {
    return false;
  }
  if (p.silu && (p.up_row % 128 != 0 || p.up_row <= 0 || p.N > p.up_row || p.up_row * 2 > p.Np)) return false;
  if (p.batch < 1 || p.batch > 65535 || (p.batch > 1 && (p.x || p.silu)) || p.ldq < 0 ||
      (p.ldq > 0 && p.ldq % 16 != 0) || p.batch_q % 16 != 0 || p.batch_w % 16 != 0)
    return false;
  return true;
}

namespace {

// DSERVE_FP8_PREFETCH=all|first (A/B runs) overrides Fp8GemmSmallMParams::prefetch.
Fp8GemmSmallMParams::Prefetch prefetch_env() {
  static const Fp8GemmSmallMParams::Prefetch mode = [] {
    const char* e = env_text("DSERVE_FP8_PREFETCH");
    if (e && std::strcmp(e, "all") == 0) return Fp8GemmSmallMParams::Prefetch::kAll;
    if (e && std::strcmp(e, "first") == 0) return Fp8GemmSmallMParams::Prefetch::kFirst;
    return Fp8GemmSmallMParams::Prefetch::kAuto;
  }();
  return mode;
}

// The kStageU kernels at <= 16 tokens unless DSERVE_FP8_STAGED=0 (read per launch).
bool fp8_staged() {
  return env_flag("DSERVE_FP8_STAGED", true);
}

template <int NT, bool kFused, bool kSilu, int kU>
cudaError_t launch_staged(const dim3 grid, const dim3 block, cudaStream_t stream, const SmallMLaunch& l) {
  constexpr int kSmem = kWarps * kU * 4 * 32 * 16;
  auto kernel = gemm_small_m_kernel<NT, kFused, kSilu, kU>;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t attr =
      attrs.get([&] { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem); });
  if (attr != cudaSuccess) return attr;
  return launch_pdl(kernel, grid, block, kSmem, stream, l);
}

template <bool kFused, bool kSilu>
cudaError_t launch_kind(SmallMLaunch& l, int64_t blocks, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(l.p[0].batch)), block(kWarps * 32);
  const int64_t M = l.p[0].M;
  if (fp8_staged() && (kFused || M <= 16)) {
    // One round when 2 blocks a warp cover K (K <= 2048), else 4-block rounds.
    const bool wide = l.p[0].Kp > 2 * kWarps * 128 || l.p[1].Kp > 2 * kWarps * 128;
    if (kFused || M <= 8)
      return wide ? launch_staged<1, kFused, kSilu, 4>(grid, block, stream, l)
                  : launch_staged<1, kFused, kSilu, 2>(grid, block, stream, l);
    return wide ? launch_staged<2, false, kSilu, 4>(grid, block, stream, l)
                : launch_staged<2, false, kSilu, 2>(grid, block, stream, l);
  }
  if (kFused || M <= 8) return launch_pdl(gemm_small_m_kernel<1, kFused, kSilu>, grid, block, 0, stream, l);
  if (M <= 16) return launch_pdl(gemm_small_m_kernel<2, false, kSilu>, grid, block, 0, stream, l);
  if (M <= 32) return launch_pdl(gemm_small_m_kernel<4, false, kSilu>, grid, block, 0, stream, l);
  return launch_pdl(gemm_small_m_kernel<8, false, kSilu>, grid, block, 0, stream, l);
}

cudaError_t launch_small_m(const Fp8GemmSmallMParams& a, const Fp8GemmSmallMParams* b, cudaStream_t stream,
                           bool early = false) {
  const int64_t rows = a.silu ? 8 : 16;  // output columns per CTA
  SmallMLaunch l;
  l.early = early;
  l.p[0] = a;
  l.p[1] = b ? *b : a;
  l.split = (a.N + rows - 1) / rows;
  const int64_t blocks = l.split + (b ? (b->N + rows - 1) / rows : 0);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  using Prefetch = Fp8GemmSmallMParams::Prefetch;
  const Prefetch forced = prefetch_env();
  for (Fp8GemmSmallMParams& q : l.p) {
    Prefetch mode = forced != Prefetch::kAuto ? forced : q.prefetch;
    if (mode == Prefetch::kAuto) mode = blocks * a.batch <= device_sm_count() ? Prefetch::kAll : Prefetch::kFirst;
    q.prefetch_first = mode == Prefetch::kFirst;
  }
  const bool fused = a.x != nullptr;
  if (fused) return a.silu ? launch_kind<true, true>(l, blocks, stream) : launch_kind<true, false>(l, blocks, stream);
  return a.silu ? launch_kind<false, true>(l, blocks, stream) : launch_kind<false, false>(l, blocks, stream);
}

}  // namespace

cudaError_t launch_fp8_gemm_small_m(const Fp8GemmSmallMParams& p, cudaStream_t stream) {
  if (!p.x && (reinterpret_cast<uintptr_t>(p.q) | reinterpret_cast<uintptr_t>(p.w)) % 16 != 0)
    return cudaErrorMisalignedAddress;
  if (!fp8_gemm_small_m_supported(p)) return cudaErrorInvalidValue;
  if (p.M == 0 || p.N == 0) return cudaSuccess;
  return launch_small_m(p, nullptr, stream);
}

cudaError_t launch_fp8_gemm_small_m_pair(const Fp8GemmSmallMParams& a, const Fp8GemmSmallMParams& b,
                                         cudaStream_t stream) {
  if (!fp8_gemm_small_m_supported(a) || !fp8_gemm_small_m_supported(b) || a.M != b.M || a.silu || b.silu ||
      a.batch != 1 || b.batch != 1 ||
      (a.x == nullptr) != (b.x == nullptr))
    return cudaErrorInvalidValue;
  if (a.M == 0) return cudaSuccess;
  if (a.N == 0) return launch_fp8_gemm_small_m(b, stream);
  if (b.N == 0) return launch_fp8_gemm_small_m(a, stream);
  return launch_small_m(a, &b, stream, pdl_early(a.M == 1));
}

}  // namespace ds::kernels
