// Bulk L2 prefetch of device ranges (weights a later launch of the step reads), from a short launch that nothing
// needs to wait for.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

struct L2PrefetchParams {
  static constexpr int kMaxRanges = 4;
  const void* ptr[kMaxRanges] = {};  // 16-byte aligned
  int64_t bytes[kMaxRanges] = {};    // multiples of 16
  int ranges = 0;
};

// Issues cp.async.bulk.prefetch.L2 over every range in 64 KB requests, spread over one CTA an SM (s42e: nine CTAs
// drained 17 MB in 46 us; each SM's bulk requests drain at a few tens of GB/s). A plain launch, no PDL: meant for a
// stream of its own. Fails on a bad range (alignment, size, count).
cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, cudaStream_t stream);

}  // namespace ds::kernels
