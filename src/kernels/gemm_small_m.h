// BF16 GEMMs for a few rows of activations (decode): d[m, n] = sum_k x[m, k] * w'[k, n], fp32 accumulation,
// optionally strided-batched. cuBLASLt spends 5-9 us on such calls whatever the size; these kernels are
// bandwidth-bound weight streams. Raw pointers, no allocation.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// Weights stored [N, K] (w_nk, nn.Linear) only; M <= kGemmSmallMMax, K % 32 == 0; x and w bf16 with 16-byte
// aligned rows (pointers, ld and batch strides multiples of 8 elements); d bf16 or fp32 (d_f32), row stride
// ldd; nothing outside d[m < M, n < N] is written. (A CUDA-core kernel for [K, N] weights was slower than
// cuBLASLt at the absorbed-MLA shapes and was dropped.)
struct GemmSmallMParams {
  const void* x = nullptr;  // bf16 [batch][M, K], row stride ldx
  int64_t ldx = 0, stride_x = 0;
  const void* w = nullptr;  // bf16 [batch][N, K], row stride ldw
  int64_t ldw = 0, stride_w = 0;
  bool w_nk = true;  // false ([K, N] weights) is not supported
  void* d = nullptr;  // [batch][M, N], row stride ldd
  int64_t ldd = 0, stride_d = 0;
  bool d_f32 = false;
  // silu: w is [2N, K] (gate rows [0, N), up rows [N, 2N)) and d[m, n] = silu(gate) * up (fp32 before the
  // store). accumulate: d[m, n] += the product (read, add in fp32, store).
  bool silu = false;
  bool accumulate = false;
  int64_t M = 0, N = 0, K = 0;
  int batch = 1;
};
constexpr int64_t kGemmSmallMMax = 16;

// True when launch_gemm_small_m takes these arguments (shape limits and alignment above).
bool gemm_small_m_supported(const GemmSmallMParams& p);
cudaError_t launch_gemm_small_m(const GemmSmallMParams& p, cudaStream_t stream);
// Two supported problems of one launch (same M, batch 1, no silu): e.g. q_proj and kv_a_proj of one layer, which
// read the same x; one launch instead of two, and the small one fills the big one's tail.
cudaError_t launch_gemm_small_m_pair(const GemmSmallMParams& a, const GemmSmallMParams& b, cudaStream_t stream);

}  // namespace ds::kernels
