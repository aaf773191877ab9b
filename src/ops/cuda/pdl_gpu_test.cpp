// Programmatic dependent launch (kernels/pdl.cuh): with DSERVE_PDL on (the default) the second kernel of a
// stream starts while the first still runs and its pdl_wait still orders it after the first, eagerly and
// inside a CUDA graph; with DSERVE_PDL=0 the launch is plain stream order. A three-kernel chain checks the same
// ordering one launch further and reports whether the third starts before the second (itself started early) ends.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/pdl_probe.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

// The probe's launches on stream s (idle on entry), eagerly or captured into a graph that is then launched once.
void run_launches(bool graph, cudaStream_t s, const std::function<cudaError_t()>& launch) {
  if (!graph) {
    EXPECT_EQ(launch(), cudaSuccess);
    return;
  }
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(launch(), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
}

struct ProbeTimes {
  uint64_t first_end, second_start, second_after_wait;
};

ProbeTimes run_probe(bool graph) {
  init_cuda_device(0);
  cudaStream_t s = cuda_stream();
  uint64_t* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, 3 * sizeof(uint64_t)), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(d, 0, 3 * sizeof(uint64_t), s), cudaSuccess);
  constexpr int64_t kSpinNs = 200 * 1000;  // far longer than a launch: the order of the stamps is unambiguous
  // Warm-up: with lazy module loading the first launch of a kernel may wait for the work in flight.
  EXPECT_EQ(kernels::launch_pdl_probe(d, 1000, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  run_launches(graph, s, [&] { return kernels::launch_pdl_probe(d, kSpinNs, s); });
  uint64_t h[3] = {0, 0, 0};
  EXPECT_EQ(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaFree(d);
  return {h[0], h[1], h[2]};
}

// compute-sanitizer and profilers attach through injection libraries and serialise kernels: no early start.
bool tool_attached() {
  for (const char* v : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"})
    if (const char* e = std::getenv(v); e && *e) return true;
  return false;
}

void check(const ProbeTimes& t) {
  ASSERT_GT(t.first_end, 0u);
  ASSERT_GT(t.second_start, 0u);
  EXPECT_GE(t.second_after_wait, t.first_end) << "pdl_wait returned before the first kernel finished";
  if (tool_attached()) return;
  if (kernels::pdl_enabled())
    EXPECT_LT(t.second_start, t.first_end) << "the second kernel did not start early: PDL is not in effect";
  else
    EXPECT_GE(t.second_start, t.first_end);
}

// launch_pdl_chain_probe's stamps (pdl_probe.h), eagerly or as a captured graph.
struct ChainTimes {
  uint64_t a_end, b_start, b_end, c_start, c_after_wait;
};

ChainTimes run_chain(bool graph, int b_ctas, int64_t spin_ns) {
  init_cuda_device(0);
  cudaStream_t s = cuda_stream();
  uint64_t* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, 5 * sizeof(uint64_t)), cudaSuccess);
  const uint64_t init[5] = {0, UINT64_MAX, 0, 0, 0};
  auto reset = [&] { EXPECT_EQ(cudaMemcpyAsync(d, init, sizeof(init), cudaMemcpyHostToDevice, s), cudaSuccess); };
  reset();
  EXPECT_EQ(kernels::launch_pdl_chain_probe(d, b_ctas, 1000, s), cudaSuccess);  // warm-up (lazy loading)
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  reset();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  run_launches(graph, s, [&] { return kernels::launch_pdl_chain_probe(d, b_ctas, spin_ns, s); });
  uint64_t h[5] = {0, 0, 0, 0, 0};
  EXPECT_EQ(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaFree(d);
  return {h[0], h[1], h[2], h[3], h[4]};
}

TEST(Pdl, EagerSecondKernelStartsEarlyAndWaits) { check(run_probe(false)); }
TEST(Pdl, GraphSecondKernelStartsEarlyAndWaits) { check(run_probe(true)); }

// Every wait orders its kernel after the one before, one launch further along a chain, for a one-CTA and a
// 228-CTA middle kernel (the q / kv_a pair's grid at batch 1); whether the third kernel started before the second
// ended (the second having started early itself, as every weight-streaming kernel of a decode step does) is
// printed, not asserted: it is the measurement this case exists for (PDLCHAIN lines).
TEST(Pdl, ChainedKernelsWaitInOrder) {
  constexpr int64_t kSpinNs = 200 * 1000;
  for (bool graph : {false, true}) {
    for (int b_ctas : {1, 228}) {
      const ChainTimes t = run_chain(graph, b_ctas, kSpinNs);
      const std::string what = std::string(graph ? "graph" : "eager") + ", " + std::to_string(b_ctas) + " CTAs";
      ASSERT_GT(t.a_end, 0u) << what;
      ASSERT_NE(t.b_start, UINT64_MAX) << what;
      ASSERT_GT(t.c_start, 0u) << what;
      EXPECT_GE(t.b_end, t.a_end + kSpinNs) << what << ": the middle kernel's wait returned before the first ended";
      EXPECT_GE(t.c_after_wait, t.b_end) << what << ": the last kernel's wait returned before the middle one ended";
      if (!tool_attached() && kernels::pdl_enabled()) {
        EXPECT_LT(t.b_start, t.a_end) << what << ": the middle kernel did not start early";
      }
      std::printf("PDLCHAIN %s: middle started %.1f us before the first ended, last started %.1f us before the middle "
                  "ended (negative: after)\n",
                  what.c_str(), (static_cast<double>(t.a_end) - static_cast<double>(t.b_start)) / 1e3,
                  (static_cast<double>(t.b_end) - static_cast<double>(t.c_start)) / 1e3);
    }
  }
}

}  // namespace
}  // namespace ds
