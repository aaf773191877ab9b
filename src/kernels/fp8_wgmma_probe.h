// A probe for the benchmarks (not an op): an FP8 decode weight stream on Hopper's native FP8 tensor-core path
// (wgmma e4m3; mma.sync e4m3 is emulated there), to measure how far such a stream goes and to check the operand
// layouts before the FP8 decode kernels are rewritten on it.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

struct Fp8WgmmaProbeParams {
  const uint8_t* w = nullptr;  // [N, K] e4m3, row-major (16-byte aligned)
  const uint8_t* x = nullptr;  // [8, K] e4m3: the step's 8 token rows
  const float* sw = nullptr;   // [N / 128, K / 128] weight block scales
  const float* sx = nullptr;   // [8, K / 128] activation scales
  float* y = nullptr;          // [8, N]
  int64_t N = 0, K = 0;        // N % 64 == 0, K % 128 == 0, K <= 8192
  int stages = 4;              // 8 KB weight boxes in flight per CTA (2..8)
};

// y[t][n] = sum over 128-deep blocks b of (sum_k W[n][k] x[t][k]) * sw[n / 128][b] * sx[t][b]. One CTA per 64
// weight rows streams its rows' K blocks as TMA boxes {128 B, 64 rows} (128-byte swizzle) through a ring of `stages`
// buffers: a producer warp refills a stage once the consumer warpgroup has released it, and the consumers multiply
// each block by four wgmma m64n8k32 e4m3, one block in flight while they scale and add the previous one. K % 256 ==
// 0. wait_first: the weight loads go out after the PDL wait (as in a chain after its activations), else before it.
cudaError_t launch_fp8_wgmma_probe(const Fp8WgmmaProbeParams& p, bool wait_first, cudaStream_t stream);

}  // namespace ds::kernels
