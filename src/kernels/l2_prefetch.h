// L2 prefetch of weight ranges: a hint with no result. Bulk prefetches from a small grid on a stream of their own
// fetch bytes a later kernel streams while the chain's latency-bound kernels leave the HBM idle.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

struct L2PrefetchParams {
  static constexpr int kMaxRanges = 4;
  const void* ptr[kMaxRanges];  // 16-byte aligned
  int64_t bytes[kMaxRanges];    // multiples of 16
  int num_ranges;
  int chunk_bytes;  // bytes per bulk prefetch (a multiple of 16)
  int pace_ns;      // a thread's sleep between its prefetches (0: none), so the stream leaves the HBM some room
  int evict_last;   // 1: the lines are marked evict-last (kept over plain and evict-first lines until read)
};

// ctas CTAs of 32 threads, each thread prefetching every (ctas * 32)-th chunk of the ranges laid end to end.
cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, int ctas, cudaStream_t stream);

}  // namespace ds::kernels
