// The CUDA-graph batch-size plan (SGLang's capture list, padding, default max batch) and the CPU-build
// refusal; capture and replay themselves are tested on the GPU (src/ops/cuda/cuda_graph_gpu_test.cpp).
#include "runner/cuda_graph_runner.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(CudaGraphSizes, SglangCaptureList) {
  const std::vector<int> s = cuda_graph_batch_sizes(64);
  EXPECT_EQ(s, (std::vector<int>{1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64}));
  EXPECT_EQ(cuda_graph_batch_sizes(10), (std::vector<int>{1, 2, 4, 8, 10}));  // max_bs itself is captured
  EXPECT_TRUE(cuda_graph_batch_sizes(0).empty());
  const std::vector<int> big = cuda_graph_batch_sizes(600);
  EXPECT_EQ(std::count(big.begin(), big.end(), 256), 1);
  EXPECT_EQ(std::count(big.begin(), big.end(), 264), 0);  // step 16 after 256
  EXPECT_EQ(std::count(big.begin(), big.end(), 272), 1);
  EXPECT_EQ(std::count(big.begin(), big.end(), 496), 1);
  EXPECT_EQ(std::count(big.begin(), big.end(), 512), 1);  // then step 32
  EXPECT_EQ(std::count(big.begin(), big.end(), 528), 0);
  EXPECT_EQ(std::count(big.begin(), big.end(), 544), 1);
  EXPECT_EQ(big.back(), 600);
  EXPECT_TRUE(std::is_sorted(big.begin(), big.end()));
}

// With speculative decoding SGLang captures a finer list (its verify steps are q rows a sequence).
TEST(CudaGraphSizes, SglangSpeculativeCaptureList) {
  EXPECT_EQ(cuda_graph_batch_sizes(48, true),
            (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 40, 44, 48}));
  EXPECT_EQ(cuda_graph_batch_sizes(9, true), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const std::vector<int> big = cuda_graph_batch_sizes(300, true);
  EXPECT_EQ(std::count(big.begin(), big.end(), 36), 0);
  EXPECT_EQ(std::count(big.begin(), big.end(), 68), 0);
  EXPECT_EQ(std::count(big.begin(), big.end(), 72), 1);
  EXPECT_EQ(std::count(big.begin(), big.end(), 264), 0);
  EXPECT_EQ(std::count(big.begin(), big.end(), 288), 1);
  EXPECT_EQ(big.back(), 300);
  EXPECT_EQ(graph_capture_sizes({}, 12, true), cuda_graph_batch_sizes(12, true));
  EXPECT_EQ(graph_capture_sizes({3, 1}, 12, true), (std::vector<int>{1, 3}));  // a given list is kept
}

TEST(CudaGraphSizes, PaddingAndDefaults) {
  const std::vector<int> s = cuda_graph_batch_sizes(160);
  EXPECT_EQ(padded_batch_size(s, 1), 1);
  EXPECT_EQ(padded_batch_size(s, 3), 4);
  EXPECT_EQ(padded_batch_size(s, 5), 8);
  EXPECT_EQ(padded_batch_size(s, 13), 16);
  EXPECT_EQ(padded_batch_size(s, 153), 160);
  EXPECT_EQ(padded_batch_size(s, 161), -1);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  EXPECT_EQ(default_cuda_graph_max_bs(16 * gib), 8);
  EXPECT_EQ(default_cuda_graph_max_bs(24 * gib), 24);
  EXPECT_EQ(default_cuda_graph_max_bs(48 * gib), 32);
  EXPECT_EQ(default_cuda_graph_max_bs(80 * gib), 256);   // H100
  EXPECT_EQ(default_cuda_graph_max_bs(141 * gib), 256);  // H200
  EXPECT_EQ(default_cuda_graph_max_bs(192 * gib), 512);
}

// --cuda-graph-bs: the listed sizes, sorted and once each, up to the request cap, which is added where the list
// went past it (SGLang's get_batch_sizes_to_capture); no list: SGLang's own up to the cap.
TEST(CudaGraphSizes, ExplicitListUnderTheCap) {
  EXPECT_EQ(graph_capture_sizes({8, 1, 4, 4, 2}, 8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(graph_capture_sizes({1, 16, 64}, 32), (std::vector<int>{1, 16, 32}));
  EXPECT_EQ(graph_capture_sizes({48, 64}, 32), (std::vector<int>{32}));
  EXPECT_EQ(graph_capture_sizes({1, 3}, 64), (std::vector<int>{1, 3}));  // the cap only bounds, it is not added
  EXPECT_EQ(graph_capture_sizes({}, 10), cuda_graph_batch_sizes(10));
  EXPECT_TRUE(graph_capture_sizes({4}, 0).empty());
  const std::vector<int> s = graph_capture_sizes({1, 5, 12}, 12);
  EXPECT_EQ(padded_batch_size(s, 2), 5);  // a batch pads to the next listed size
  EXPECT_EQ(padded_batch_size(s, 13), -1);
}

}  // namespace
}  // namespace ds
