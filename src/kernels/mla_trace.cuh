// Per-block timelines of the MLA decode and combine kernels, compiled only with -DDS_MLA_TRACE
// (scripts/build_mla_trace.sh builds dserve_mla_trace with it): the clocks the kernels record and the host-side
// read of a kernel's trace buffer. Empty in normal builds.
#pragma once
#ifdef DS_MLA_TRACE
#include <cuda_runtime.h>

namespace ds::kernels::mla_trace {

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned smid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

// Copies the first min(tickets taken, max_rows, rows) rows of `slots` values of the buffer symbol `buf` to host and
// resets the ticket symbol; the row count, or -1 on a CUDA error.
inline int read(const void* ticket, const void* buf, int max_rows, int slots, unsigned long long* host, int rows) {
  unsigned t = 0;
  if (cudaMemcpyFromSymbol(&t, ticket, sizeof t) != cudaSuccess) return -1;
  const int n = static_cast<int>(t < static_cast<unsigned>(max_rows) ? t : max_rows);
  const int k = n < rows ? n : rows;
  if (cudaMemcpyFromSymbol(host, buf, static_cast<size_t>(k) * slots * 8) != cudaSuccess) return -1;
  const unsigned zero = 0;
  return cudaMemcpyToSymbol(ticket, &zero, sizeof zero) == cudaSuccess ? k : -1;
}

}  // namespace ds::kernels::mla_trace
#endif
