// RMSNorm kernels (bf16 in/out, fp32 math): y = w * x / sqrt(mean(x^2) + eps), optionally fused with the
// residual add of the pre-norm decoder (residual += x; y = norm(residual)).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

struct RmsNormParams {
  const void* x;        // [rows, n] bf16, row stride x_stride elements
  void* residual;       // [rows, n] bf16 or null: when set, residual += x first and the norm reads residual
  const void* weight;   // [n] bf16 (fp32 when weight_f32)
  void* out;            // [rows, n] bf16, row stride out_stride
  int64_t rows;
  int64_t n;
  int64_t x_stride;
  int64_t residual_stride;
  int64_t out_stride;
  float eps;
  bool weight_f32 = false;
};

cudaError_t launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);

}  // namespace ds::kernels
