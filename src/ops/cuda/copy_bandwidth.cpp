// measure_copy_bandwidth (copy_bandwidth.h).
#include "ops/cuda/copy_bandwidth.h"

#include <algorithm>
#include <vector>

#include "ops/cuda/cuda_runtime.h"

namespace ds {

double measure_copy_bandwidth(cudaStream_t stream, size_t bytes, int reps) {
  void *a = nullptr, *b = nullptr;
  DS_CUDA_CHECK(cudaMalloc(&a, bytes));
  DS_CUDA_CHECK(cudaMalloc(&b, bytes));
  DS_CUDA_CHECK(cudaMemsetAsync(a, 1, bytes, stream));
  for (int i = 0; i < 3; ++i) DS_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
  cudaEvent_t e0, e1;
  DS_CUDA_CHECK(cudaEventCreate(&e0));
  DS_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < std::max(reps, 1); ++i) {
    DS_CUDA_CHECK(cudaEventRecord(e0, stream));
    DS_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
    DS_CUDA_CHECK(cudaEventRecord(e1, stream));
    DS_CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    DS_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  DS_CUDA_CHECK(cudaFree(a));
  DS_CUDA_CHECK(cudaFree(b));
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3);
}

}  // namespace ds
