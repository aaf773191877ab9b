// Programmatic dependent launch (kernels/pdl.cuh): with DSERVE_PDL on (the default) the second kernel of a
// stream starts while the first still runs and its pdl_wait still orders it after the first, eagerly and
// inside a CUDA graph; with DSERVE_PDL=0 the launch is plain stream order.
#include <cstdint>
#include <cstdlib>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/pdl_probe.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

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
  if (graph) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_EQ(kernels::launch_pdl_probe(d, kSpinNs, s), cudaSuccess);
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  } else {
    EXPECT_EQ(kernels::launch_pdl_probe(d, kSpinNs, s), cudaSuccess);
  }
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

TEST(Pdl, EagerSecondKernelStartsEarlyAndWaits) { check(run_probe(false)); }
TEST(Pdl, GraphSecondKernelStartsEarlyAndWaits) { check(run_probe(true)); }

}  // namespace
}  // namespace ds
