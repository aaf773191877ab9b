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

// launch_pdl_chain_probe's B.
__global__ void chain_middle_kernel(uint64_t* t, int64_t spin_ns) {
  const uint64_t start = global_ns();
  pdl_enter();
  const uint64_t after = global_ns();
  while (global_ns() - after < static_cast<uint64_t>(spin_ns)) {
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMin(reinterpret_cast<unsigned long long*>(&t[1]), static_cast<unsigned long long>(start));
    atomicMax(reinterpret_cast<unsigned long long*>(&t[2]), static_cast<unsigned long long>(global_ns()));
  }
}

// Stamps its start before pdl_wait to t[0], its time after it to t[1] (launch_pdl_stamp, the chain probe's C).
__global__ void stamp_kernel(uint64_t* t) {
  const uint64_t start = global_ns();
  pdl_enter();
  if (threadIdx.x == 0) {
    t[0] = start;
    t[1] = global_ns();
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

cudaError_t launch_pdl_chain_probe(uint64_t* t, int b_ctas, int64_t spin_ns, cudaStream_t stream) {
  if (b_ctas < 1) return cudaErrorInvalidValue;
  if (const cudaError_t e = launch_pdl(probe_first_kernel, 1, 32, 0, stream, t, spin_ns); e != cudaSuccess) return e;
  if (const cudaError_t e = launch_pdl(chain_middle_kernel, static_cast<unsigned>(b_ctas), 256, 0, stream, t, spin_ns);
      e != cudaSuccess)
    return e;
  return launch_pdl(stamp_kernel, 1, 32, 0, stream, t + 3);
}

cudaError_t launch_pdl_spin(uint64_t* end, int64_t spin_ns, cudaStream_t stream) {
  return launch_pdl(probe_first_kernel, 1, 32, 0, stream, end, spin_ns);
}

cudaError_t launch_pdl_stamp(uint64_t* t, cudaStream_t stream) { return launch_pdl(stamp_kernel, 1, 32, 0, stream, t); }

cudaError_t launch_pdl_probe(uint64_t* t, int64_t spin_ns, cudaStream_t stream) {
  if (const cudaError_t e = launch_pdl(probe_first_kernel, 1, 32, 0, stream, t, spin_ns); e != cudaSuccess) return e;
  return launch_pdl(probe_second_kernel, 1, 32, 0, stream, t);
}

}  // namespace ds::kernels
