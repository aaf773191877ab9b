// Small-M bf16 GEMMs (see gemm_small_m.h): a tensor-core weight stream over [N, K] weights.
#include "kernels/gemm_small_m.h"

#include <cuda_bf16.h>

#include "kernels/pdl.cuh"
#include "kernels/small_m_tile.cuh"

namespace ds::kernels {
namespace {

using small_m::accumulate_rows;
using small_m::NkShape;

constexpr int kWarps = 8;

__device__ __forceinline__ void store_out(const GemmSmallMParams& p, int64_t off, float v) {
  if (p.d_f32) {
    float* d = static_cast<float*>(p.d) + off;
    *d = p.accumulate ? *d + v : v;
  } else {
    __nv_bfloat16* d = static_cast<__nv_bfloat16*>(p.d) + off;
    *d = __float2bfloat16(p.accumulate ? __bfloat162float(*d) + v : v);
  }
}

// [N, K] weights. CTA = NT x 8 weight rows (the mma's N side) x up to 16 tokens (its M side); its 8 warps
// split K in 32-deep chunks (small_m::accumulate_rows) and reduce through shared memory. kSilu: the two tiles
// are the gate and up rows of the same 8 output columns.
// Two problems sharing the launch (GemmSmallMPair): CTAs [0, split) take the first, the rest the second.
struct NkLaunch {
  GemmSmallMParams p[2];
  int64_t split;
};

template <int NT, bool kM16, bool kSilu = false>
__global__ void __launch_bounds__(kWarps * 32) gemm_small_m_nk_kernel(const NkLaunch launch) {
  static_assert(!kSilu || NT == 2, "the fused SiLU takes a gate tile and an up tile");
  const bool second = blockIdx.x >= launch.split;
  const GemmSmallMParams& p = launch.p[second ? 1 : 0];
  const int64_t bx = second ? blockIdx.x - launch.split : blockIdx.x;
  using S = NkShape<NT, kM16>;
  extern __shared__ uint4 stage[];
  __shared__ float red[kWarps][NT * 4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  uint4* my = stage + warp * S::kSlots * 32 + lane;  // slot s of this lane: my[s * 32]
  const int64_t b = blockIdx.y;
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x) + b * p.stride_x;
  const __nv_bfloat16* w = static_cast<const __nv_bfloat16*>(p.w) + b * p.stride_w;
  const int64_t n0 = bx * (kSilu ? 8 : NT * 8);

  const __nv_bfloat16* wrow[NT];
  bool wok[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int64_t n = kSilu ? n0 + g : n0 + t * 8 + g;
    wok[t] = n < p.N;
    wrow[t] = w + (wok[t] ? n + (kSilu && t == 1 ? p.N : 0) : 0) * p.ldw + tig * 8;
  }
  // Weights are never written during a forward: pull this CTA's rows into L2 while the previous kernel of the
  // stream finishes (programmatic dependent launch, pdl.cuh), then wait for it before touching x or d.
  for (int r = warp; r < NT * 8; r += kWarps) {
    const int t = r / 8;
    const int64_t n = kSilu ? n0 + r % 8 : n0 + r;
    if (n < p.N) {
      const char* row = reinterpret_cast<const char*>(w + (n + (kSilu && t == 1 ? p.N : 0)) * p.ldw);
      for (int64_t off = lane * 128; off < p.K * 2; off += 32 * 128)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + off));
    }
  }
  pdl_enter();
  const bool xok0 = g < p.M, xok1 = kM16 && g + 8 < p.M;
  const __nv_bfloat16* xrow0 = x + (xok0 ? g : 0) * p.ldx + tig * 8;
  const __nv_bfloat16* xrow1 = x + (xok1 ? g + 8 : 0) * p.ldx + tig * 8;

  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[t][c] = 0.0f;

  accumulate_rows<NT, kM16>(wrow, wok, xrow0, xok0, xrow1, xok1, p.K, warp, kWarps, my, acc);

#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[warp][t * 4 + c][lane] = acc[t][c];
  __syncthreads();
  const int64_t d_base = b * p.stride_d;
  if (kSilu) {
    if (threadIdx.x < 4 * 32) {
      const int c = threadIdx.x / 32, l = threadIdx.x % 32;
      float gate = 0.0f, up = 0.0f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) gate += red[wi][c][l], up += red[wi][4 + c][l];
      const int64_t m = (l >> 2) + (c >= 2 ? 8 : 0);
      const int64_t n = n0 + (l & 3) * 2 + (c & 1);
      if (m < p.M && n < p.N) store_out(p, d_base + m * p.ldd + n, gate / (1.0f + expf(-gate)) * up);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < NT * 4 * 32; idx += kWarps * 32) {
    const int tc = idx / 32, l = idx % 32;
    float sum = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) sum += red[wi][tc][l];
    const int t = tc / 4, c = tc % 4;
    // C fragment: c0, c1 = token g, weight rows 2 tig + {0, 1}; c2, c3 = token g + 8.
    const int64_t m = (l >> 2) + (c >= 2 ? 8 : 0);
    const int64_t n = n0 + t * 8 + (l & 3) * 2 + (c & 1);
    if (m < p.M && n < p.N) store_out(p, d_base + m * p.ldd + n, sum);
  }
}

// p2 (optional): a second problem of batch 1 in the same launch.
template <int NT, bool kM16, bool kSilu = false>
cudaError_t launch_nk(const GemmSmallMParams& p, cudaStream_t stream, const GemmSmallMParams* p2 = nullptr) {
  constexpr size_t kSmem = static_cast<size_t>(kWarps) * NkShape<NT, kM16>::kSlots * 512;
  static const cudaError_t attr = cudaFuncSetAttribute(
      gemm_small_m_nk_kernel<NT, kM16, kSilu>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem));
  if (attr != cudaSuccess) return attr;
  const int64_t cols = kSilu ? 8 : NT * 8;
  NkLaunch l;
  l.p[0] = p;
  l.p[1] = p2 ? *p2 : p;
  l.split = (p.N + cols - 1) / cols;
  const int64_t blocks = l.split + (p2 ? (p2->N + cols - 1) / cols : 0);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.batch));
  return launch_pdl(gemm_small_m_nk_kernel<NT, kM16, kSilu>, grid, kWarps * 32, kSmem, stream, l);
}

bool aligned16(const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; }

}  // namespace

bool gemm_small_m_supported(const GemmSmallMParams& p) {
  if (p.M < 1 || p.N < 1 || p.K < 1 || p.batch < 1 || p.batch > 65535 || !p.x || !p.w || !p.d) return false;
  if (!aligned16(p.w) || p.ldw % 8 != 0 || (p.batch > 1 && p.stride_w % 8 != 0)) return false;
  return p.w_nk && p.M <= kGemmSmallMMax && p.K % 32 == 0 && aligned16(p.x) && p.ldx % 8 == 0 &&
         (p.batch == 1 || p.stride_x % 8 == 0) && (p.N + 7) / 8 <= 0x7fffffff;
}

cudaError_t launch_gemm_small_m(const GemmSmallMParams& p, cudaStream_t stream) {
  if (!gemm_small_m_supported(p)) return cudaErrorInvalidValue;
  const bool m16 = p.M > 8;
  if (p.silu) return m16 ? launch_nk<2, true, true>(p, stream) : launch_nk<2, false, true>(p, stream);
  // Two 8-row tiles per CTA once there are enough rows to fill the machine several times over.
  const bool two = p.N * p.batch >= 8192;
  if (two) return m16 ? launch_nk<2, true>(p, stream) : launch_nk<2, false>(p, stream);
  return m16 ? launch_nk<1, true>(p, stream) : launch_nk<1, false>(p, stream);
}

cudaError_t launch_gemm_small_m_pair(const GemmSmallMParams& a, const GemmSmallMParams& b, cudaStream_t stream) {
  if (!gemm_small_m_supported(a) || !gemm_small_m_supported(b) || a.silu || b.silu || a.batch != 1 ||
      b.batch != 1 || a.M != b.M)
    return cudaErrorInvalidValue;
  return a.M > 8 ? launch_nk<1, true>(a, stream, &b) : launch_nk<1, false>(a, stream, &b);
}

}  // namespace ds::kernels
