// RMSNorm kernels (bf16 in/out, fp32 math): y = w * x / sqrt(mean(x^2) + eps), optionally fused with the
// residual add of the pre-norm decoder (residual += x; y = norm(residual)) and with y's block-FP8 quantization.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/moe.h"

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
  // Optional (issue 7): out quantized for block-FP8 linears in the same kernel, bit for bit as launch_fp8_quant_act
  // quantizes the bf16 out: q [rows, n] e4m3 (row stride n), q_scales [rows, n / 128] (token-major).
  uint8_t* q = nullptr;
  float* q_scales = nullptr;
  bool q_ue8m0 = false;
  // Optional: x is an MoE output not yet reduced (moe.y set; p.x unused): the rows launch_moe_combine would write
  // from moe (moe.out unused), summed in this kernel bit for bit as that launch sums them, then added to the
  // residual (required) and normalised as usual: one launch for the combine and the next layer's input norm.
  MoeCombineParams moe{};
};

// Whether launch_rms_norm takes p with moe.y set: the vector path with a residual, rows of <= 8192 elements,
// moe.top_k <= 9, moe's rows / dim those of the norm and its y / addend 16-byte aligned.
bool rms_norm_moe_supported(const RmsNormParams& p);

// Whether launch_rms_norm takes p with q set: rows of whole 128-groups on the vector path.
bool rms_norm_quant_supported(const RmsNormParams& p);

cudaError_t launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);

}  // namespace ds::kernels
