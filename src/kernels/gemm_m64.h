// BF16 GEMM for 17-64 rows of activations against a small [N, K] weight (the MoE router at batch 17-64 decode):
// d[m, n] = sum_k x[m, k] * w[n, k], fp32 accumulation and output. cuBLASLt spends ~5 us on the router's 64 x 64 x
// 2048 product (session 53's trace); this is one round of L2 reads on tensor cores. Raw pointers, no allocation.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// x bf16 [M, K] (row stride ldx), w bf16 [N, K] (row stride ldw), d fp32 [M, N] (row stride ldd); 1 <= M <=
// kGemmM64Max, K % 32 == 0, x / w rows 16-byte aligned (pointers and strides multiples of 8 elements). Nothing
// outside d[m < M, n < N] is written. The weight is read before the PDL wait (weights only).
struct GemmM64Params {
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  int64_t ldw = 0;
  float* d = nullptr;
  int64_t ldd = 0;
  int64_t M = 0, N = 0, K = 0;
};
constexpr int64_t kGemmM64Max = 64;

bool gemm_m64_supported(const GemmM64Params& p);
cudaError_t launch_gemm_m64(const GemmM64Params& p, cudaStream_t stream);

}  // namespace ds::kernels
