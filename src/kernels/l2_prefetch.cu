// Bulk L2 prefetch (kernels/l2_prefetch.h): request g of all ranges goes to CTA g % grid.
#include "kernels/l2_prefetch.h"

#include <algorithm>

#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

constexpr int64_t kRequest = 64 * 1024;
constexpr int kThreads = 32;

__host__ __device__ __forceinline__ int64_t requests(int64_t bytes) { return (bytes + kRequest - 1) / kRequest; }

__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(const L2PrefetchParams p) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t g = blockIdx.x + static_cast<int64_t>(gridDim.x) * threadIdx.x;; g += step) {
    int64_t i = g;
    int r = 0;
    for (; r < p.ranges && i >= requests(p.bytes[r]); ++r) i -= requests(p.bytes[r]);
    if (r == p.ranges) break;
    const int64_t off = i * kRequest, len = p.bytes[r] - off < kRequest ? p.bytes[r] - off : kRequest;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const char* src = static_cast<const char*>(p.ptr[r]) + off;
    if (p.evict_last) {
      uint64_t policy;
      asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;\n" ::"l"(src),
                   "r"(static_cast<uint32_t>(len)), "l"(policy)
                   : "memory");
    } else {
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(static_cast<uint32_t>(len))
                   : "memory");
    }
#endif
  }
}

}  // namespace

cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, cudaStream_t stream) {
  if (p.ranges < 0 || p.ranges > L2PrefetchParams::kMaxRanges) return cudaErrorInvalidValue;
  int64_t reqs = 0;
  for (int r = 0; r < p.ranges; ++r) {
    if (!p.ptr[r] || (reinterpret_cast<uintptr_t>(p.ptr[r]) & 15) || p.bytes[r] <= 0 || p.bytes[r] % 16)
      return cudaErrorInvalidValue;
    reqs += requests(p.bytes[r]);
  }
  if (reqs == 0) return cudaSuccess;
  const int64_t grid = std::min<int64_t>(reqs, device_sm_count());
  return launch_plain(l2_prefetch_kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), 0, stream, p);
}

}  // namespace ds::kernels
