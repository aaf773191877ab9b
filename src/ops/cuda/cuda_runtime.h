// CUDA runtime plumbing for the CUDA backend: error checks with context, and the device allocator that
// core/tensor.h uses for Device::kCuda tensors.
#pragma once
#include <string>

#include <cuda_runtime.h>

#include "core/check.h"
#include "core/tensor.h"

#define DS_CUDA_CHECK(expr)                                                                   \
  do {                                                                                        \
    cudaError_t ds_err_ = (expr);                                                             \
    DS_CHECK(ds_err_ == cudaSuccess, #expr, ": ", cudaGetErrorString(ds_err_));               \
  } while (0)

namespace ds {

// Selects `device_index` and registers cudaMalloc/cudaFree as the allocator for Device::kCuda.
void init_cuda_device(int device_index);

// Host <-> device copies of whole tensors (same dtype and shape).
Tensor cuda_upload(const Tensor& host);
Tensor cuda_download(const Tensor& dev);

}  // namespace ds
