// kernels/l2_prefetch.h (dserve_kernel_bench's l2_prefetch cases): ranges of any size (a partial last request), up to
// four, on a stream of their own; bad ranges refused. What it leaves in the L2 is the benchmark's question, not
// asserted here.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/l2_prefetch.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

TEST(L2Prefetch, RunsAndRefusesBadRanges) {
  init_cuda_device(0);
  cudaStream_t s = cuda_side_stream();
  void* w = nullptr;
  const int64_t bytes = (16 << 20) + 4096;  // 16 MB and a partial 64 KB request
  ASSERT_EQ(cudaMalloc(&w, bytes), cudaSuccess);
  kernels::L2PrefetchParams p;
  p.ptr[0] = w;
  p.bytes[0] = bytes;
  p.ptr[1] = static_cast<const char*>(w) + 65536;
  p.bytes[1] = 65536 + 48;
  p.ranges = 2;
  for (bool evict_last : {false, true}) {
    p.evict_last = evict_last;
    EXPECT_EQ(kernels::launch_l2_prefetch(p, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  kernels::L2PrefetchParams bad = p;
  bad.bytes[1] = 40;  // not a multiple of 16
  EXPECT_EQ(kernels::launch_l2_prefetch(bad, s), cudaErrorInvalidValue);
  bad = p;
  bad.ptr[1] = static_cast<const char*>(w) + 8;  // misaligned
  EXPECT_EQ(kernels::launch_l2_prefetch(bad, s), cudaErrorInvalidValue);
  bad = p;
  bad.ranges = kernels::L2PrefetchParams::kMaxRanges + 1;
  EXPECT_EQ(kernels::launch_l2_prefetch(bad, s), cudaErrorInvalidValue);
  bad = p;
  bad.ranges = 0;  // nothing to do
  EXPECT_EQ(kernels::launch_l2_prefetch(bad, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaFree(w), cudaSuccess);
}

}  // namespace
}  // namespace ds
