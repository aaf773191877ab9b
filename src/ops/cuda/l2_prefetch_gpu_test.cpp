// kernels/l2_prefetch.h: ranges of any size (a partial last request), up to four, on its own stream and inside a graph
// capture that forks and joins that stream (as Ops::prefetch / prefetch_join do); bad ranges refused. What it leaves
// in the L2 is a timing matter (scripts/device A/B runs), not asserted here.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/l2_prefetch.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

TEST(L2Prefetch, RunsEagerlyAndInAGraphAndRefusesBadRanges) {
  init_cuda_device(0);
  cudaStream_t s = cuda_main_stream(), ps = cuda_prefetch_stream();
  void* w = nullptr;
  const int64_t bytes = (16 << 20) + 4096;  // 16 MB and a partial 64 KB request
  ASSERT_EQ(cudaMalloc(&w, bytes), cudaSuccess);
  kernels::L2PrefetchParams p;
  p.ptr[0] = w;
  p.bytes[0] = bytes;
  p.ptr[1] = static_cast<const char*>(w) + 65536;
  p.bytes[1] = 65536 + 48;
  p.ranges = 2;
  EXPECT_EQ(kernels::launch_l2_prefetch(p, ps), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(ps), cudaSuccess);
  // Captured from the main stream: fork to the prefetch stream, prefetch, join back.
  cudaEvent_t fork = nullptr, done = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(fork, s), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(ps, fork, 0), cudaSuccess);
  EXPECT_EQ(kernels::launch_l2_prefetch(p, ps), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(done, ps), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, done, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaEventDestroy(fork);
  cudaEventDestroy(done);
  kernels::L2PrefetchParams bad = p;
  bad.bytes[1] = 40;  // not a multiple of 16
  EXPECT_EQ(kernels::launch_l2_prefetch(bad, ps), cudaErrorInvalidValue);
  bad = p;
  bad.ptr[1] = static_cast<const char*>(w) + 8;  // misaligned
  EXPECT_EQ(kernels::launch_l2_prefetch(bad, ps), cudaErrorInvalidValue);
  bad = p;
  bad.ranges = kernels::L2PrefetchParams::kMaxRanges + 1;
  EXPECT_EQ(kernels::launch_l2_prefetch(bad, ps), cudaErrorInvalidValue);
  bad = p;
  bad.ranges = 0;  // nothing to do
  EXPECT_EQ(kernels::launch_l2_prefetch(bad, ps), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(ps), cudaSuccess);
  cudaFree(w);
}

}  // namespace
}  // namespace ds
