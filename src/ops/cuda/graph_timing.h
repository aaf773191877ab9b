// Device time per call of a short launch sequence, as decode steps run it: captured into a CUDA graph and replayed
// (eagerly, a call of a few small launches is bound by the host). Used by the FP8 GEMM benchmark, tune-gemm and the
// GPU tests' timing lines.
#pragma once
#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "ops/cuda/cuda_runtime.h"

namespace ds {

// Median over 5 replays of the time per call of f(0 .. iters - 1) on stream s (the compute stream by default), in
// us, after 3 eager calls and a warm-up replay. f must be capturable (no host synchronisation).
template <typename F>
double graph_time_us(F&& f, int iters, cudaStream_t s = cuda_stream()) {
  for (int i = 0; i < 3; ++i) f(i);
  DS_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DS_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < iters; ++i) f(i);
  DS_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  DS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  DS_CUDA_CHECK(cudaGraphLaunch(exec, s));
  cudaEvent_t e0, e1;
  DS_CUDA_CHECK(cudaEventCreate(&e0));
  DS_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    DS_CUDA_CHECK(cudaEventRecord(e0, s));
    DS_CUDA_CHECK(cudaGraphLaunch(exec, s));
    DS_CUDA_CHECK(cudaEventRecord(e1, s));
    DS_CUDA_CHECK(cudaEventSynchronize(e1));
    float t;
    DS_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / iters);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3;
}

}  // namespace ds
