// Block-FP8 kernels (see fp8_gemm.h): activation quantization and the small-M tensor-core GEMM.
#include "kernels/fp8_gemm.h"
#include "kernels/fp8_quant.cuh"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

#include <cstdlib>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace ds::kernels {
namespace {

using ptx::mma_e4m3;

// One warp per (token, 128-group); each lane owns 4 consecutive channels.
__global__ void quant_act_kernel(Fp8QuantParams p) {
  pdl_enter();
  const int64_t groups = p.Kp / 128;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (warp >= p.M * groups) return;
  const int64_t m = warp / groups, g = warp % groups;
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t k = g * 128 + lane * 4 + j;
    float x = 0.0f;
    if (k < p.K) {
      x = p.x_f32 ? static_cast<const float*>(p.x)[m * p.ldx + k]
                  : __bfloat162float(static_cast<const __nv_bfloat16*>(p.x)[m * p.ldx + k]);
    }
    v[j] = x;  // columns K..Kp stay zero: e4m3(0) = 0
  }
  uint32_t packed;
  const float s = fp8::quantize_group_warp(v, p.ue8m0, &packed);
  reinterpret_cast<uint32_t*>(p.q + m * p.Kp + g * 128)[lane] = packed;
  if (lane == 0) p.s[p.s_m_major ? g * p.s_ld + m : m * p.s_ld + g] = s;
}

__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

constexpr int kWarps = 8;

// CTA = 16 weight rows (the mma's M side) x all tokens (NT tiles of 8 on the mma's N side); its 8 warps split
// the K blocks and reduce through shared memory. Within a 128-deep K block a lane streams bytes [16 tig, +16)
// and [64 + 16 tig, +16) of weight rows g and g + 8 (g = lane / 4) and of token g, so each 16-byte load
// instruction covers 64 contiguous bytes of a row (whole sectors; see moe_fp8.cu); the k order inside the
// block is permuted the same way for both operands, so each mma still sums matching products. Per block:
// partial (fp32) * sx * sw, as the reference does.
template <int NT>
__global__ void __launch_bounds__(kWarps * 32) gemm_small_m_kernel(Fp8GemmSmallMParams p) {
  __shared__ float red[kWarps][NT * 4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int64_t kblocks = p.Kp / 128;
  const float* sw_row = p.sw + (n0 / 128) * kblocks;
  const uint8_t* w0 = p.w + (n0 + g) * p.Kp + tig * 16;
  const uint8_t* w1 = w0 + 8 * p.Kp;
  // Weights are never written during a forward: pull the first blocks of this CTA's 16 rows (inside the
  // zero-padded Np) into L2 while the previous kernel of the stream finishes (pdl.cuh), then wait for it before
  // reading q or sx.
  if (!p.prefetch_first) {
    for (int r = warp; r < 16; r += kWarps)
      for (int64_t off = lane * 128; off < p.Kp; off += 32 * 128)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p.w + (n0 + r) * p.Kp + off));
  } else {
    // The two blocks this warp loads first (kb = warp, warp + kWarps) of the 16 rows: lane = row + 16 x which.
    const int64_t kb = warp + (lane >> 4) * kWarps;
    if (kb < kblocks) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p.w + (n0 + (lane & 15)) * p.Kp + kb * 128));
  }
  // And the CTA's scale row (kblocks floats), read once per K block below.
  if (warp == kWarps - 1)
    for (int64_t kb = lane * 32; kb < kblocks; kb += 32 * 32) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(sw_row + kb));
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
  // A block's activations and scales: this lane's 32 bytes of token t * 8 + g, the weight scale, and the
  // activation scales of tokens t * 8 + 2 tig + {0, 1} (loaded together with the weights: loaded after them,
  // each is another round trip).
  struct Act {
    uint4 q[NT][2];
    float sx[NT][2];
    float sw;
  };
  auto load_act = [&](int64_t kb, Act& a) {
    const int64_t off = kb * 128;
    a.sw = __ldg(sw_row + kb);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int64_t m = t * 8 + g;  // the token this lane loads (B operand column g)
      a.q[t][0] = a.q[t][1] = make_uint4(0, 0, 0, 0);
      if (m < p.M) {
        const uint4* qp = reinterpret_cast<const uint4*>(p.q + m * p.Kp + off + tig * 16);
        a.q[t][0] = __ldg(qp);
        a.q[t][1] = __ldg(qp + 4);
      }
      const int64_t m0 = t * 8 + tig * 2;
      a.sx[t][0] = m0 < p.M ? __ldg(p.sx + m0 * p.sx_ld + kb) : 0.0f;
      a.sx[t][1] = m0 + 1 < p.M ? __ldg(p.sx + (m0 + 1) * p.sx_ld + kb) : 0.0f;
    }
  };
  auto compute_block = [&](const uint4 (&w)[4], const Act& a) {
    const uint32_t r[8] = {w[0].x, w[0].y, w[0].z, w[0].w, w[1].x, w[1].y, w[1].z, w[1].w};
    const uint32_t s[8] = {w[2].x, w[2].y, w[2].z, w[2].w, w[3].x, w[3].y, w[3].z, w[3].w};
    const float swv = a.sw;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const uint4 qa = a.q[t][0], qb = a.q[t][1];
      const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < 4; ++j) mma_e4m3(part, r[2 * j], s[2 * j], r[2 * j + 1], s[2 * j + 1], q[2 * j], q[2 * j + 1]);
      // C fragment: part[0..1] = rows g, tokens 2 tig + {0, 1}; part[2..3] = rows g + 8, same tokens.
      const float sx0 = a.sx[t][0], sx1 = a.sx[t][1];
      acc[t][0] += part[0] * sx0 * swv;
      acc[t][1] += part[1] * sx1 * swv;
      acc[t][2] += part[2] * sx0 * swv;
      acc[t][3] += part[3] * sx1 * swv;
    }
  };
  if constexpr (NT <= 2) {
    // Few tokens: registers to spare, so keep the next block's weights in flight while computing this one
    // (twice the bytes in flight per warp; decode GEMMs are latency/bandwidth bound).
    uint4 cur[4], nxt[4];
    Act acur, anxt;
    int64_t kb = warp;
    if (kb < kblocks) {
      load_block(kb, cur);
      load_act(kb, acur);
    }
    for (; kb < kblocks; kb += kWarps) {
      const bool more = kb + kWarps < kblocks;
      if (more) {
        load_block(kb + kWarps, nxt);
        load_act(kb + kWarps, anxt);
      }
      compute_block(cur, acur);
      if (more) {
#pragma unroll
        for (int i = 0; i < 4; ++i) cur[i] = nxt[i];
        acur = anxt;
      }
    }
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
  __nv_bfloat16* d = static_cast<__nv_bfloat16*>(p.d);
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
  transpose_bf16_kernel<<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(32, 8), 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_fp8_quant_act(const Fp8QuantParams& p, cudaStream_t stream) {
  if (p.Kp % 128 != 0 || p.Kp < p.K || p.M < 0) return cudaErrorInvalidValue;
  if (p.M == 0) return cudaSuccess;
  const int64_t warps = p.M * (p.Kp / 128);
  const int64_t threads = 256;
  const int64_t blocks = (warps * 32 + threads - 1) / threads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_pdl(quant_act_kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, stream, p);
}

cudaError_t launch_fp8_gemm_small_m(const Fp8GemmSmallMParams& p, cudaStream_t stream) {
  if (p.M < 0 || p.M > kFp8SmallMMax || p.Np % 128 != 0 || p.Kp % 128 != 0 || p.N > p.Np || p.Kp == 0)
    return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(p.q) | reinterpret_cast<uintptr_t>(p.w)) % 16 != 0) return cudaErrorMisalignedAddress;
  if (p.M == 0 || p.N == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((p.N + 15) / 16)), block(kWarps * 32);
  static const bool first = [] {
    const char* e = std::getenv("DSERVE_FP8_PREFETCH");
    return e && std::strcmp(e, "first") == 0;
  }();
  Fp8GemmSmallMParams q = p;
  q.prefetch_first = q.prefetch_first || first;
  if (q.M <= 8) return launch_pdl(gemm_small_m_kernel<1>, grid, block, 0, stream, q);
  if (q.M <= 16) return launch_pdl(gemm_small_m_kernel<2>, grid, block, 0, stream, q);
  if (q.M <= 32) return launch_pdl(gemm_small_m_kernel<4>, grid, block, 0, stream, q);
  return launch_pdl(gemm_small_m_kernel<8>, grid, block, 0, stream, q);
}

}  // namespace ds::kernels
