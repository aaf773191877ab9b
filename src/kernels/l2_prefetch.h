// Bulk L2 prefetch of device ranges, for dserve_kernel_bench's l2_prefetch cases (does the L2 keep a prefetched weight
// range until a later read?). The model does not use it: two forms of a shared-MLP prefetch lost (sessions 42-43).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

struct L2PrefetchParams {
  static constexpr int kMaxRanges = 4;
  const void* ptr[kMaxRanges] = {};  // 16-byte aligned
  int64_t bytes[kMaxRanges] = {};    // multiples of 16
  int ranges = 0;
  bool evict_last = false;  // the lines with an L2 evict-last priority (else normal)
};

// Issues cp.async.bulk.prefetch.L2 over every range in 64 KB requests, spread over one CTA an SM (s42e: nine CTAs
// drained 17 MB in 46 us; each SM's bulk requests drain at a few tens of GB/s). A plain launch, no PDL: meant for a
// stream of its own. Fails on a bad range (alignment, size, count).
cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, cudaStream_t stream);

}  // namespace ds::kernels
