// The weight-read probe (see read_probe.h).
#include "kernels/read_probe.h"

#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 8;

// The xor of elements i, i + stride, ... < n of p, with kUnroll 16-byte loads in flight per thread.
__device__ __forceinline__ uint32_t xor_stream(const uint4* p, int64_t i, int64_t n, int64_t stride) {
  uint32_t acc = 0;
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
  return acc;
}

__global__ void __launch_bounds__(kThreads) read_probe_kernel(const uint4* p, int64_t n, uint32_t* sink,
                                                              uint32_t never, bool wait_first) {
  if (wait_first) pdl_wait();
  pdl_launch_dependents();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const uint32_t acc = xor_stream(p, static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x, n, stride);
  pdl_wait();
  if (acc == never) *sink = acc;
}

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// n: 16-byte elements a phase, read as read_probe_kernel reads its range (xor_stream).
__global__ void __launch_bounds__(kThreads) barrier_probe_kernel(const uint4* p, int64_t n, int slices, int phases,
                                                                 uint32_t* sync, uint32_t* sink, uint32_t never,
                                                                 bool ahead) {
  const unsigned ctas = gridDim.x;
  const int64_t stride = static_cast<int64_t>(ctas) * kThreads, first = blockIdx.x * kThreads + threadIdx.x;
  uint32_t gen = load_acquire(&sync[1]);  // no CTA can move it before every CTA has arrived once
  uint32_t acc = 0;
  uint4 pre[kUnroll];  // ahead: the next phase's first round, in flight across the barrier
  auto issue_first = [&](const uint4* base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      pre[u] = first + u * stride < n ? ptx::load_stream(base + first + u * stride) : make_uint4(0u, 0u, 0u, 0u);
  };
  if (ahead) issue_first(p);
  for (int ph = 0; ph < phases; ++ph) {
    const uint4* base = p + static_cast<int64_t>(ph % slices) * n;
    int64_t i = first;
    if (ahead) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc ^= pre[u].x ^ pre[u].y ^ pre[u].z ^ pre[u].w;
      i += kUnroll * stride;
    }
    acc ^= xor_stream(base, i, n, stride);
    if (ahead && ph + 1 < phases) issue_first(p + static_cast<int64_t>((ph + 1) % slices) * n);
    // The grid barrier: the last CTA to arrive resets the counter, then moves the generation on.
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(&sync[0], 1u) + 1 == ctas) {
        sync[0] = 0;
        __threadfence();
        atomicAdd(&sync[1], 1u);
      } else {
        while (load_acquire(&sync[1]) == gen) {
        }
      }
    }
    __syncthreads();
    ++gen;
  }
  if (acc == never) *sink = acc;
}

}  // namespace

cudaError_t launch_barrier_probe(const void* p, int64_t bytes, int slices, int phases, uint32_t* sync, uint32_t* sink,
                                 uint32_t never, int ctas_per_sm, bool ahead, cudaStream_t stream) {
  if (!p || !sync || bytes < 0 || bytes % 16 != 0 || reinterpret_cast<uintptr_t>(p) % 16 != 0 || slices < 1 ||
      phases < 1 || ctas_per_sm < 1)
    return cudaErrorInvalidValue;
  int per_sm = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, barrier_probe_kernel, kThreads, 0);
      e != cudaSuccess)
    return e;
  if (per_sm < ctas_per_sm) return cudaErrorCooperativeLaunchTooLarge;  // every CTA must be resident at once
  const unsigned ctas = static_cast<unsigned>(device_sm_count() * ctas_per_sm);
  return launch_plain(barrier_probe_kernel, dim3(ctas), kThreads, 0, stream, static_cast<const uint4*>(p), bytes / 16,
                      slices, phases, sync, sink, never, ahead);
}

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
