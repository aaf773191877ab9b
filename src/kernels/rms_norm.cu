// RMSNorm: one block per row, fp32 sum of squares reduced with warp shuffles. Memory-bound: each element
// is read once (twice with the fused residual: read x and residual, write residual and out).
#include <cuda_bf16.h>

#include "kernels/rms_norm.h"

namespace ds::kernels {
namespace {

constexpr int kThreads = 256;

__device__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? warp_sums[lane] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

__global__ void rms_norm_kernel(RmsNormParams p) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x) + row * p.x_stride;
  __nv_bfloat16* res = p.residual ? static_cast<__nv_bfloat16*>(p.residual) + row * p.residual_stride : nullptr;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + row * p.out_stride;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += kThreads) {
    float v = __bfloat162float(x[i]);
    if (res) {
      v += __bfloat162float(res[i]);
      res[i] = __float2bfloat16(v);  // the residual stream stays bf16
      v = __bfloat162float(res[i]);
    }
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(p.n) + p.eps);
  for (int64_t i = threadIdx.x; i < p.n; i += kThreads) {
    const float v = __bfloat162float(res ? res[i] : x[i]);
    const float w = p.weight_f32 ? static_cast<const float*>(p.weight)[i]
                                 : __bfloat162float(static_cast<const __nv_bfloat16*>(p.weight)[i]);
    out[i] = __float2bfloat16(w * (v * inv));
  }
}

}  // namespace

cudaError_t launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  rms_norm_kernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ds::kernels
