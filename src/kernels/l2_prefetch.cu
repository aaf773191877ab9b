// L2 prefetch of weight ranges (l2_prefetch.h): cp.async.bulk.prefetch.L2, optionally with an evict-last policy.
#include "kernels/l2_prefetch.h"
#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

__global__ void __launch_bounds__(32) l2_prefetch_kernel(const L2PrefetchParams p) {
  const int64_t chunk = p.chunk_bytes;
  int64_t total = 0;  // chunks over all ranges
  for (int r = 0; r < p.num_ranges; ++r) total += (p.bytes[r] + chunk - 1) / chunk;
  uint64_t policy = 0;
  if (p.evict_last) asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  const int64_t stride = static_cast<int64_t>(gridDim.x) * 32;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x; c < total; c += stride) {
    int r = 0;
    int64_t first = 0;  // the first chunk of range r
    for (; r < p.num_ranges - 1; ++r) {
      const int64_t n = (p.bytes[r] + chunk - 1) / chunk;
      if (c < first + n) break;
      first += n;
    }
    const int64_t off = (c - first) * chunk;
    const uint32_t size = static_cast<uint32_t>(min(chunk, p.bytes[r] - off));
    const char* a = static_cast<const char*>(p.ptr[r]) + off;
    if (p.evict_last)
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;\n" ::"l"(a), "r"(size), "l"(policy)
                   : "memory");
    else
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(a), "r"(size) : "memory");
    if (p.pace_ns > 0) __nanosleep(p.pace_ns);
  }
}

}  // namespace

cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, int ctas, cudaStream_t stream) {
  if (p.num_ranges < 1 || p.num_ranges > L2PrefetchParams::kMaxRanges || ctas < 1 || p.chunk_bytes < 16 ||
      p.chunk_bytes % 16 != 0)
    return cudaErrorInvalidValue;
  for (int r = 0; r < p.num_ranges; ++r)
    if (!p.ptr[r] || p.bytes[r] < 16 || p.bytes[r] % 16 != 0 || reinterpret_cast<uintptr_t>(p.ptr[r]) % 16 != 0)
      return cudaErrorInvalidValue;
  return launch_plain(l2_prefetch_kernel, dim3(ctas), dim3(32), 0, stream, p);
}

}  // namespace ds::kernels
