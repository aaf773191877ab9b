// NCCL groups and multi-GPU tensor parallelism. One GPU: a one-rank group's all-reduce (eager and in a CUDA graph)
// leaves its tensor as it was, a GPU named twice is refused, threads bind devices. MultiGpu* (ctest label multigpu,
// run on a machine with 2 or more GPUs; they fail on fewer): every rank's all-reduce gives the same sum, and the
// CUDA engine with --tp-size 2 (graphs and eager) and --dp-size 2 --enable-dp-attention gives the one-GPU engine's greedy tokens and log-probabilities.
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "dist/cuda/nccl_group.h"
#include "ops/cuda/cuda_runtime.h"
#include "runner/engine_test_util.h"

namespace ds {
namespace {

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// [n] bf16 or f32 values rank-dependent and exactly representable (small integers / 8).
Tensor rank_values(int rank, int64_t n, DType dtype) {
  Tensor h = Tensor::empty({n}, dtype, Device::kCpu);
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>((i * 7 + rank * 3) % 64) / 8.0f;
    if (dtype == DType::kF32)
      h.f32()[i] = v;
    else
      h.data_as<uint16_t>()[i] = f32_to_bf16(v);
  }
  return cuda_upload(h);
}

TEST(NcclGroup, OneRankAllReduceLeavesTheTensorAndIsCapturable) {
  init_cuda_device(0);
  auto group = NcclGroup::create({0});
  ASSERT_TRUE(group.is_ok()) << group.status().message();
  EXPECT_GT((*group)->version(), 21800);
  auto member = (*group)->member(0);
  EXPECT_EQ(member->size(), 1);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    Tensor t = rank_values(0, 1000, dt);
    const Tensor want = cuda_download(t);
    member->all_reduce_sum(t);
    const Tensor got = cuda_download(t);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.nbytes()), 0) << dtype_name(dt);
  }
  // Captured into a graph and replayed (decode graphs hold every layer's all-reduces).
  Tensor t = rank_values(0, 4096, DType::kBF16);
  const Tensor want = cuda_download(t);
  cudaStream_t s = cuda_stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  member->all_reduce_sum(t);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  const Tensor got = cuda_download(t);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.nbytes()), 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  // Aborted: every later all-reduce throws, naming why.
  (*group)->abort("test abort");
  try {
    member->all_reduce_sum(t);
    ADD_FAILURE() << "an all-reduce of an aborted group returned";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("test abort"), std::string::npos) << e.what();
  }
}

TEST(NcclGroup, RefusesAGpuTwice) {
  init_cuda_device(0);
  auto group = NcclGroup::create({0, 0});
  ASSERT_FALSE(group.is_ok());
  EXPECT_NE(group.status().message().find("both on GPU 0"), std::string::npos) << group.status().message();
}

TEST(CudaRuntime, ThreadsBindTheirDevice) {
  init_cuda_device(0);
  const int n = device_count();
  std::vector<int> seen(static_cast<size_t>(n), -1);
  std::vector<std::thread> threads;
  for (int d = 0; d < n; ++d) {
    init_cuda_device(d);
    threads.emplace_back([d, &seen] {
      bind_cuda_device(d);
      Tensor t = rank_values(d, 256, DType::kF32);  // allocated and copied on d
      cudaPointerAttributes a{};
      EXPECT_EQ(cudaPointerGetAttributes(&a, t.data()), cudaSuccess);
      seen[static_cast<size_t>(d)] = a.device;
    });
  }
  for (auto& t : threads) t.join();
  bind_cuda_device(0);
  for (int d = 0; d < n; ++d) EXPECT_EQ(seen[static_cast<size_t>(d)], d);
  EXPECT_EQ(cuda_device(), 0);
}

// --base-gpu-id / --gpu-id-step naming a GPU past the visible ones: the engine refuses to start, naming it.
TEST(TensorParallelCuda, AMissingGpuIsNamed) {
  const int n = device_count();
  BatchEngineOptions o;
  o.model_path = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/v3";
  o.device = "cuda";
  o.verbose = false;
  o.tp_size = 2;
  o.base_gpu_id = n - 1;  // rank 1 on GPU n
  auto e = make_batch_engine(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("GPU " + std::to_string(n) + " does not exist"), std::string::npos)
      << e.status().message();
  o.tp_size = 1;
  o.base_gpu_id = 0;
  o.gpu_id_step = 0;
  e = make_batch_engine(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("--gpu-id-step"), std::string::npos) << e.status().message();
}

// ---- two GPUs or more ----

TEST(MultiGpu, AllReduceGivesEveryRankTheSameSum) {
  const int n = device_count();
  ASSERT_GE(n, 2) << "the multigpu cases need 2 GPUs or more";
  std::vector<int> devices;
  for (int d = 0; d < n; ++d) {
    init_cuda_device(d);
    devices.push_back(d);
  }
  auto group = NcclGroup::create(devices);
  ASSERT_TRUE(group.is_ok()) << group.status().message();
  const int64_t len = 3 * 7168 + 5;
  std::vector<Tensor> got(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      bind_cuda_device(devices[r]);
      auto m = (*group)->member(r);
      Tensor t = rank_values(r, len, DType::kBF16);
      m->all_reduce_sum(t);
      Tensor f = rank_values(r, len, DType::kF32);
      m->all_reduce_sum(f);
      got[static_cast<size_t>(r)] = to_f32(cuda_download(t));
      EXPECT_EQ(cuda_device(), devices[r]);
      const Tensor fs = cuda_download(f);
      for (int64_t i = 0; i < len; ++i) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += static_cast<float>((i * 7 + q * 3) % 64) / 8.0f;
        ASSERT_EQ(fs.f32()[i], want) << "f32 element " << i << " rank " << r;
      }
    });
  for (auto& t : threads) t.join();
  bind_cuda_device(0);
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(std::memcmp(got[0].data(), got[static_cast<size_t>(r)].data(), got[0].nbytes()), 0) << "rank " << r;
}

size_t trusted(const std::vector<TokenLogprob>& lps, double margin) {
  for (size_t i = 0; i < lps.size(); ++i)
    if (lps[i].top.size() < 2 || lps[i].top[0].first - lps[i].top[1].first < margin) return i;
  return lps.size();
}

test::EngineRun run(const std::string& fx, int tp, int ep, bool graphs, const std::vector<EngineRequest>& reqs,
                    int dp = 1) {
  BatchEngineOptions o;
  o.model_path = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + fx;
  o.device = "cuda";
  o.chunked_prefill_size = 48;
  o.page_size = 16;
  o.max_total_tokens = 8192;
  o.verbose = true;
  o.tp_size = tp;
  o.ep_size = ep;
  o.dp_size = dp;
  o.disable_cuda_graph = !graphs;
  return test::run_engine(o, reqs);
}

class MultiGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(MultiGpu, TensorParallelEngineMatchesOneGpu) {
  ASSERT_GE(device_count(), 2) << "the multigpu cases need 2 GPUs or more";
  std::mt19937 rng(5);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.rid = "t" + std::to_string(i);
    for (int k = 0; k < 5 + 23 * i; ++k) r.input_ids.push_back(static_cast<int32_t>(2 + rng() % 1000));
    r.sampling.max_new_tokens = 12;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    r.return_logprob = true;
    r.top_logprobs_num = 2;
    reqs.push_back(r);
  }
  const test::EngineRun one = run(GetParam(), 1, 1, true, reqs);
  struct Case {
    int tp, ep;
    bool graphs;
    int dp;
  };
  // Tensor parallelism with and without graphs; data-parallel attention (--dp 2 --tp 2: eager steps so far).
  for (const Case c : {Case{2, 1, true, 1}, Case{2, 1, false, 1}, Case{2, 1, true, 2}}) {
    const test::EngineRun two = run(GetParam(), c.tp, c.ep, c.graphs, reqs, c.dp);
    const std::string what = "tp " + std::to_string(c.tp) + " dp " + std::to_string(c.dp) + (c.graphs ? " graphs" : " eager");
    if (c.graphs && c.dp == 1) EXPECT_GT(two.stats.num_graph_steps, 0u) << what;
    size_t compared = 0;
    for (const auto& r : reqs) {
      const size_t n = trusted(one.lps.at(r.rid), 0.1);
      const auto& want = one.tokens.at(r.rid);
      const auto& got = two.tokens.at(r.rid);
      ASSERT_EQ(got.size(), want.size()) << what << " " << r.rid;
      EXPECT_TRUE(std::equal(want.begin(), want.begin() + n, got.begin())) << what << " " << r.rid << " first " << n;
      for (size_t k = 0; k < n; ++k)
        EXPECT_NEAR(two.lps.at(r.rid)[k].logprob, one.lps.at(r.rid)[k].logprob, 0.1) << what << " " << r.rid << " " << k;
      compared += n;
    }
    EXPECT_GT(compared, reqs.size() * 4) << what;
    std::printf("%s %s: %zu tokens compared, %llu graph steps\n", GetParam().c_str(), what.c_str(), compared,
                static_cast<unsigned long long>(two.stats.num_graph_steps));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MultiGpu, ::testing::Values("v2_lite", "v3"));  // (v3_fp8: 32-wide expert slices)

}  // namespace
}  // namespace ds
