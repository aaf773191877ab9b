// The programmatic-dependent-launch probe (see pdl_probe.h).
#include "kernels/pdl_probe.h"

#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void probe_first_kernel(uint64_t* t, int64_t spin_ns) {
  pdl_enter();
  const uint64_t start = global_ns();
  while (global_ns() - start < static_cast<uint64_t>(spin_ns)) {
  }
  if (threadIdx.x == 0) t[0] = global_ns();
}

__global__ void probe_second_kernel(uint64_t* t) {
  const uint64_t start = global_ns();
  pdl_wait();
  pdl_launch_dependents();
  if (threadIdx.x == 0) {
    t[1] = start;
    t[2] = global_ns();
  }
}

// Lets the next kernel start at once, spins, then copies (one CTA, 16-byte words).
__global__ void delayed_copy_kernel(uint4* dst, const uint4* src, int64_t words, int64_t spin_ns) {
  pdl_enter();
  const uint64_t start = global_ns();
  while (global_ns() - start < static_cast<uint64_t>(spin_ns)) {
  }
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

cudaError_t launch_pdl_delayed_copy(void* dst, const void* src, int64_t bytes, int64_t spin_ns, cudaStream_t stream) {
  if (bytes % 16 != 0 || ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15))
    return cudaErrorInvalidValue;
  return launch_pdl(delayed_copy_kernel, 1, 256, 0, stream, static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                    bytes / 16, spin_ns);
}

cudaError_t launch_pdl_probe(uint64_t* t, int64_t spin_ns, cudaStream_t stream) {
  if (const cudaError_t e = launch_pdl(probe_first_kernel, 1, 32, 0, stream, t, spin_ns); e != cudaSuccess) return e;
  return launch_pdl(probe_second_kernel, 1, 32, 0, stream, t);
}

}  // namespace ds::kernels
