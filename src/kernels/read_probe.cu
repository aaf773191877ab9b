// The weight-read probe (see read_probe.h).
#include "kernels/read_probe.h"

#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 8;

__global__ void __launch_bounds__(kThreads) read_probe_kernel(const uint4* p, int64_t n, uint32_t* sink,
                                                              uint32_t never, bool wait_first) {
  if (wait_first) pdl_wait();
  pdl_launch_dependents();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  uint32_t acc = 0;
  int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = ptx::load_stream(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = ptx::load_stream(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  pdl_wait();
  if (acc == never) *sink = acc;
}

}  // namespace

cudaError_t launch_read_probe(const void* p, int64_t bytes, uint32_t* sink, uint32_t never, int ctas_per_sm,
                              bool wait_first, cudaStream_t stream) {
  if (!p || bytes <= 0 || bytes % 16 != 0 || reinterpret_cast<uintptr_t>(p) % 16 != 0 || ctas_per_sm < 1)
    return cudaErrorInvalidValue;
  const int64_t n = bytes / 16;
  int64_t ctas = static_cast<int64_t>(device_sm_count()) * ctas_per_sm;
  const int64_t need = (n + kThreads - 1) / kThreads;
  if (ctas > need) ctas = need;
  return launch_pdl(read_probe_kernel, dim3(static_cast<unsigned>(ctas)), kThreads, 0, stream,
                    static_cast<const uint4*>(p), n, sink, never, wait_first);
}

}  // namespace ds::kernels
