// Host: how many CTAs of a kernel fit an SM at a dynamic shared-memory size, for launchers that size grids by it
// (the MoE walks' resident grids, the wgmma FP8 GEMM's residency check), and how many thread-block clusters of it fit
// the device at once (cluster launches past that run in waves).
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

// Clusters of `cluster` CTAs of `kernel` (block `threads`, `smem` bytes of dynamic shared memory, its attributes set
// by the caller) resident on the device at once: cudaOccupancyMaxActiveClusters, which counts the GPCs' SMs (a
// cluster's CTAs share one GPC, so clusters of 8 at one CTA an SM leave a 132-SM H100's odd SMs idle). 0 when such a
// cluster cannot run; the query's error is cleared so that no later check of a stream picks it up.
template <class Kernel>
int active_clusters(Kernel kernel, dim3 threads, size_t smem, dim3 cluster) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = cluster;
  cfg.blockDim = threads;
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster.x;
  attr[0].val.clusterDim.y = cluster.y;
  attr[0].val.clusterDim.z = cluster.z;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace ds::kernels
