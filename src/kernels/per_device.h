// Host: values a launcher computes once per CUDA device. Function attributes (the dynamic shared-memory limit a
// launcher raises, cluster permissions) live in each device's context, so a process that drives several GPUs from
// its threads (tensor-parallel ranks) must set them on each device, not once per process.
#pragma once
#include <mutex>

#include <cuda_runtime.h>

namespace ds::kernels {

constexpr int kMaxCudaDevices = 64;

// `static PerDevice<cudaError_t> attr; if (attr.get([] { return cudaFuncSetAttribute(...); }) != cudaSuccess) ...`:
// make() runs once for each device current on a calling thread (cudaGetDevice), and its result is kept for that device.
template <class T>
class PerDevice {
 public:
  template <class Make>
  T get(Make&& make) {
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess || d < 0 || d >= kMaxCudaDevices) return make();
    std::call_once(once_[d], [&] { value_[d] = make(); });
    return value_[d];
  }

 private:
  std::once_flag once_[kMaxCudaDevices];
  T value_[kMaxCudaDevices]{};
};

}  // namespace ds::kernels
