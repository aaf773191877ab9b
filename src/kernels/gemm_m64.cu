// The small-weight GEMM for 17-64 rows (gemm_m64.h). A CTA computes 16 rows x 8 weight rows with one m16n8k16 tile
// a 32-wide K chunk, its 8 warps splitting K; each lane reads 16 bytes of two x rows and one w row a chunk straight
// from global memory (L2: the norm just wrote x; the weight is prefetched before the PDL wait), and the warps' tiles
// are summed through shared memory.
#include <cuda_bf16.h>

#include "kernels/gemm_m64.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 4;  // K chunks a lane has in flight

__device__ __forceinline__ uint4 ld16(const void* p, bool valid) {
  return valid ? __ldg(static_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

// Within a 32-wide chunk lane (g, t) holds k = 8t .. 8t + 7 of its rows: the first m16n8k16 step takes k 8t .. 8t + 3
// (a0 / a2 and b0 / b1 as pairs), the second 8t + 4 .. 8t + 7. A and B see the same permutation of K, so the sum is
// the product's.
__global__ void __launch_bounds__(kWarps * 32) gemm_m64_kernel(const GemmM64Params p) {
  __shared__ float red[kWarps][16][9];  // +1 column: no bank conflicts on the sum
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * 8 + g;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * 16 + g, m1 = m0 + 8;
  const int64_t chunks = p.K / 32;
  const int64_t per_warp = (chunks + kWarps - 1) / kWarps;
  const int64_t c_begin = warp * per_warp, c_end = c_begin + per_warp < chunks ? c_begin + per_warp : chunks;
  const __nv_bfloat16* wrow = static_cast<const __nv_bfloat16*>(p.w) + (n < p.N ? n : 0) * p.ldw + 8 * t;
  const __nv_bfloat16* x0 = static_cast<const __nv_bfloat16*>(p.x) + (m0 < p.M ? m0 : 0) * p.ldx + 8 * t;
  const __nv_bfloat16* x1 = static_cast<const __nv_bfloat16*>(p.x) + (m1 < p.M ? m1 : 0) * p.ldx + 8 * t;
  if (n < p.N)
    for (int64_t c = c_begin; c < c_end; ++c) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(wrow + c * 32));
  pdl_wait();
  pdl_launch_dependents();
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t c = c_begin; c < c_end; c += kUnroll) {
    uint4 a0[kUnroll], a1[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const bool in = c + u < c_end;
      b[u] = ld16(wrow + (c + u) * 32, in && n < p.N);
      a0[u] = ld16(x0 + (c + u) * 32, in && m0 < p.M);
      a1[u] = ld16(x1 + (c + u) * 32, in && m1 < p.M);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      ptx::mma_bf16(acc, a0[u].x, a1[u].x, a0[u].y, a1[u].y, b[u].x, b[u].y);
      ptx::mma_bf16(acc, a0[u].z, a1[u].z, a0[u].w, a1[u].w, b[u].z, b[u].w);
    }
  }
  // acc: rows g / g + 8, columns 2t / 2t + 1 of the tile.
  red[warp][g][2 * t] = acc[0];
  red[warp][g][2 * t + 1] = acc[1];
  red[warp][g + 8][2 * t] = acc[2];
  red[warp][g + 8][2 * t + 1] = acc[3];
  __syncthreads();
  if (threadIdx.x < 128) {
    const int r = threadIdx.x >> 3, col = threadIdx.x & 7;
    const int64_t m = static_cast<int64_t>(blockIdx.y) * 16 + r, nn = static_cast<int64_t>(blockIdx.x) * 8 + col;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w][r][col];
    if (m < p.M && nn < p.N) p.d[m * p.ldd + nn] = s;
  }
}

}  // namespace

bool gemm_m64_supported(const GemmM64Params& p) {
  const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return p.x && p.w && p.d && a16(p.x) && a16(p.w) && p.M >= 1 && p.M <= kGemmM64Max && p.N >= 1 && p.K >= 32 &&
         p.K % 32 == 0 && p.ldx >= p.K && p.ldx % 8 == 0 && p.ldw >= p.K && p.ldw % 8 == 0 && p.ldd >= p.N &&
         (p.N + 7) / 8 < (int64_t{1} << 31);
}

cudaError_t launch_gemm_m64(const GemmM64Params& p, cudaStream_t stream) {
  if (!gemm_m64_supported(p)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((p.N + 7) / 8), static_cast<unsigned>((p.M + 15) / 16));
  return launch_pdl(gemm_m64_kernel, grid, kWarps * 32, 0, stream, p);
}

}  // namespace ds::kernels
