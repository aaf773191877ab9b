// The FP8 wgmma weight-stream probe (fp8_wgmma_probe.h): TMA boxes of weight rows through a ring of shared-memory
// stages, native wgmma m64n8k32 e4m3 against the step's 8 token rows, block scales applied per 128-deep block.
#include <cuda.h>

#include "kernels/fp8_wgmma_probe.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/tensor_map.h"
#include "kernels/wgmma.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kRows = 64;               // weight rows per CTA: the wgmma's M
constexpr int kBoxBytes = 128 * kRows;  // one 128-deep block of them (8 KB)
constexpr int kMaxStages = 8;
constexpr int kMaxBlocks = 64;  // K <= 8192 (V3: 7168)
constexpr int kThreads = 160;   // a consumer warpgroup (warps 0-3) and a producer warp (4)

// Shared memory: [stages][64 rows][128 B] weight boxes, [blocks][8 rows][128 B] activations (both swizzled), then
// the stages' "full" (TMA landed) and "empty" (four consumer warps done) mbarriers. The producer warp keeps the ring
// full; the consumers keep one block's wgmmas in flight while they scale and add the previous block's.
__global__ void __launch_bounds__(kThreads, 1)
    fp8_wgmma_probe_kernel(const Fp8WgmmaProbeParams p, const __grid_constant__ CUtensorMap wmap, int wait_first) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_align1024(smem_raw);
  const uint32_t sbase = smem_u32(smem);
  const int S = p.stages, nb = static_cast<int>(p.K / 128);
  const uint32_t xbase = sbase + S * kBoxBytes;
  const uint32_t full = xbase + nb * 1024, empty = full + kMaxStages * 8;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int row0 = blockIdx.x * kRows;
  if (tid == 0) mbar_init_ring(full, empty, S, 4);  // four consumer warps release a stage
  __syncthreads();
  if (warp == 4) {  // producer
    if (lane == 0) {
      auto issue = [&](int b) {
        const int s = b % S;
        if (b >= S) mbar_wait(empty + s * 8, ((b / S) - 1) & 1);
        mbar_expect_tx(full + s * 8, kBoxBytes);
        tma_load_box(sbase + s * kBoxBytes, &wmap, b * 128, row0, full + s * 8);
      };
      int b = 0;
      if (!wait_first)
        for (; b < S && b < nb; ++b) issue(b);  // weights: never written by a forward
      pdl_enter();
      for (; b < nb; ++b) issue(b);
    } else {
      pdl_enter();
    }
    return;
  }
  pdl_enter();
  // The activations: chunk c (16 B) of token row t of block b at b * 1024 + t * 128 + ((c ^ t) << 4).
  for (int i = tid; i < nb * 64; i += 128) {
    const int b = i >> 6, t = (i >> 3) & 7, c = i & 7;
    cp_async16(xbase + b * 1024 + t * 128 + ((c ^ t) << 4), p.x + t * p.K + b * 128 + c * 16, true);
  }
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async();
  named_barrier(1, 128);

  // This thread's D elements: rows 16 warp + lane / 4 (+ 8), token columns 2 (lane % 4) (+ 1).
  const int r = 16 * warp + (lane >> 2), c0 = 2 * (lane & 3);
  const float* swr = p.sw + (row0 / 128) * nb;  // the 64 rows share one 128-row scale block
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  auto mma = [&](int b, float (&d)[4]) {
    const int s = b % S;
    wgmma_k128_block(d, sbase + s * kBoxBytes, xbase + b * 1024, full + s * 8, (b / S) & 1);
  };
  auto fold = [&](int b, const float (&d)[4]) {  // block b's wgmmas are complete
    const float sw = __ldg(swr + b);
    const float sx0 = __ldg(p.sx + c0 * nb + b), sx1 = __ldg(p.sx + (c0 + 1) * nb + b);
    acc[0] += d[0] * sw * sx0;
    acc[1] += d[1] * sw * sx1;
    acc[2] += d[2] * sw * sx0;
    acc[3] += d[3] * sw * sx1;
    __syncwarp();
    if (lane == 0) mbar_arrive(empty + (b % S) * 8);
  };
  wgmma_blocks_one_ahead(nb, mma, fold);
  const int64_t n = row0 + r;
  p.y[c0 * p.N + n] = acc[0];
  p.y[(c0 + 1) * p.N + n] = acc[1];
  p.y[c0 * p.N + n + 8] = acc[2];
  p.y[(c0 + 1) * p.N + n + 8] = acc[3];
}

}  // namespace

cudaError_t launch_fp8_wgmma_probe(const Fp8WgmmaProbeParams& p, bool wait_first, cudaStream_t stream) {
  if (!p.w || !p.x || !p.sw || !p.sx || !p.y || p.N <= 0 || p.N % kRows != 0 || p.K <= 0 || p.K % 128 != 0 ||
      p.K / 128 > kMaxBlocks || p.K % 256 != 0 || p.stages < 2 || p.stages > kMaxStages || p.N / kRows > INT32_MAX ||
      (reinterpret_cast<uintptr_t>(p.w) & 15) || (reinterpret_cast<uintptr_t>(p.x) & 15))
    return cudaErrorInvalidValue;
  if (!encode_tiled()) return cudaErrorNotSupported;
  CUtensorMap map;
  if (!encode_2d_swizzle128(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.w, static_cast<uint64_t>(p.K),
                            static_cast<uint64_t>(p.N), static_cast<uint64_t>(p.K), 128, kRows))
    return cudaErrorInvalidValue;
  const size_t smem = 1024 + static_cast<size_t>(p.stages) * kBoxBytes + (p.K / 128) * 1024 + 2 * kMaxStages * 8;
  const cudaError_t attr =
      cudaFuncSetAttribute(fp8_wgmma_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  return launch_pdl(fp8_wgmma_probe_kernel, dim3(static_cast<unsigned>(p.N / kRows)), kThreads, smem, stream, p, map,
                    wait_first ? 1 : 0);
}

}  // namespace ds::kernels
