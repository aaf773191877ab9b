// Host: how many CTAs of a kernel fit an SM at a dynamic shared-memory size, for launchers that size grids by it
// (the MoE walks' resident grids, the wgmma FP8 GEMM's residency check).
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

namespace ds::kernels {

// CTAs of `kernel` resident per SM with `smem` bytes of dynamic shared memory (its limit raised to that first); 0
// when it cannot run. Launchers keep it in a static of their own instantiation.
template <class Kernel>
int resident_per_sm(Kernel kernel, int threads, size_t smem) {
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) != cudaSuccess)
    return 0;
  int n = 0;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) == cudaSuccess ? n : 0;
}

}  // namespace ds::kernels
