// Bulk L2 prefetch of device ranges (weights a later launch of the step reads), issued from a short PDL launch.
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

// Issues cp.async.bulk.prefetch.L2 over every range in 64 KB requests (nothing comes back to the SMs) and exits
// once the launch before it has completed: it triggers the next launch at its entry, and its own completion still
// implies its predecessor's (a later PDL wait sees the whole chain). Fails on a bad range (alignment, count).
cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, cudaStream_t stream);

}  // namespace ds::kernels
