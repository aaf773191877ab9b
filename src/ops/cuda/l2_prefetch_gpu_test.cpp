// kernels/l2_prefetch.h: the launcher runs valid ranges (evict-last or plain, paced or not, eagerly and from a
// graph) without touching the bytes, and refuses ranges the bulk prefetch cannot take.
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/l2_prefetch.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

class L2Prefetch : public ::testing::Test {
 protected:
  void SetUp() override { init_cuda_device(0); }
};

TEST_F(L2Prefetch, RunsValidRangesAndLeavesThemUnchanged) {
  cudaStream_t s = cuda_stream();
  const int64_t n = (4 << 20) / 4 + 37 * 4;  // 4 MiB and a tail past a whole chunk
  std::vector<uint32_t> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<uint32_t>(i * 2654435761u);
  uint32_t* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(buf, host.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  kernels::L2PrefetchParams p{};
  p.num_ranges = 2;
  p.ptr[0] = buf;
  p.bytes[0] = (1 << 20) + 48;  // a chunk count that does not divide evenly
  p.ptr[1] = buf + (2 << 18);
  p.bytes[1] = n * 4 - (2 << 20);
  for (int evict_last : {1, 0})
    for (int pace : {0, 200})
      for (int chunk_kb : {16, 1}) {
        p.evict_last = evict_last;
        p.pace_ns = pace;
        p.chunk_bytes = chunk_kb << 10;
        EXPECT_EQ(kernels::launch_l2_prefetch(p, 16, s), cudaSuccess);
      }
  // The same from a captured graph.
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(kernels::launch_l2_prefetch(p, 3, s), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&e, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(e, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  std::vector<uint32_t> back(n);
  ASSERT_EQ(cudaMemcpy(back.data(), buf, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
}

TEST_F(L2Prefetch, RefusesRangesItCannotTake) {
  cudaStream_t s = cuda_stream();
  uint8_t* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 1 << 16), cudaSuccess);
  kernels::L2PrefetchParams ok{};
  ok.num_ranges = 1;
  ok.ptr[0] = buf;
  ok.bytes[0] = 1 << 16;
  ok.chunk_bytes = 4096;
  EXPECT_EQ(kernels::launch_l2_prefetch(ok, 1, s), cudaSuccess);
  auto refused = [&](kernels::L2PrefetchParams p, int ctas) {
    return kernels::launch_l2_prefetch(p, ctas, s) == cudaErrorInvalidValue;
  };
  kernels::L2PrefetchParams p = ok;
  p.ptr[0] = buf + 8;  // misaligned
  p.bytes[0] = 1024;
  EXPECT_TRUE(refused(p, 1));
  p = ok;
  p.bytes[0] = 1000;  // not a multiple of 16
  EXPECT_TRUE(refused(p, 1));
  p = ok;
  p.num_ranges = 0;
  EXPECT_TRUE(refused(p, 1));
  p = ok;
  p.num_ranges = kernels::L2PrefetchParams::kMaxRanges + 1;
  EXPECT_TRUE(refused(p, 1));
  p = ok;
  p.chunk_bytes = 24;
  EXPECT_TRUE(refused(p, 1));
  p = ok;
  p.ptr[0] = nullptr;
  EXPECT_TRUE(refused(p, 1));
  EXPECT_TRUE(refused(ok, 0));
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
}

}  // namespace
}  // namespace ds
