// CUDA device selection, allocator registration and tensor copies.
#include "ops/cuda/cuda_runtime.h"

namespace ds {

void init_cuda_device(int device_index) {
  DS_CUDA_CHECK(cudaSetDevice(device_index));
  set_device_allocator(Device::kCuda, DeviceAllocator{[](size_t n) {
                                                        void* p = nullptr;
                                                        DS_CUDA_CHECK(cudaMalloc(&p, n));
                                                        return p;
                                                      },
                                                      [](void* p) { cudaFree(p); }});
}

Tensor cuda_upload(const Tensor& host) {
  DS_CHECK(host.device() == Device::kCpu, "cuda_upload of ", host.describe());
  Tensor t = Tensor::empty(host.shape(), host.dtype(), Device::kCuda);
  DS_CUDA_CHECK(cudaMemcpy(t.data(), host.data(), host.nbytes(), cudaMemcpyHostToDevice));
  return t;
}

Tensor cuda_download(const Tensor& dev) {
  DS_CHECK(dev.device() == Device::kCuda, "cuda_download of ", dev.describe());
  Tensor t = Tensor::empty(dev.shape(), dev.dtype(), Device::kCpu);
  DS_CUDA_CHECK(cudaMemcpy(t.data(), dev.data(), dev.nbytes(), cudaMemcpyDeviceToHost));
  return t;
}

}  // namespace ds
