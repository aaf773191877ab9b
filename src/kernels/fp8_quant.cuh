// Device side of the activation quantization shared by the block-FP8 kernels (fp8_gemm.cu, moe_fp8.cu): the
// reference's per-128 scale and the saturating e4m3 conversion, written once so every kernel agrees bit for bit
// with ops/fp8.h quantize_activations_fp8.
#pragma once
#include <cstdint>

#include <cuda_fp8.h>

namespace ds::kernels::fp8 {

// max(amax, 1e-4) / 448, or exp2(ceil(log2(s))) for ue8m0 (the CPU's formula).
__device__ __forceinline__ float block_scale(float amax, bool ue8m0) {
  const float s = fmaxf(amax, 1e-4f) / 448.0f;
  return ue8m0 ? exp2f(ceilf(log2f(s))) : s;
}

__device__ __forceinline__ uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// One 128-group held by a warp, 4 consecutive values a lane (lane l: channels 4l..4l+3): the group's scale
// (returned, the same in every lane) and this lane's 4 e4m3 bytes packed little-endian into *packed.
__device__ __forceinline__ float quantize_group_warp(const float (&v)[4], bool ue8m0, uint32_t* packed) {
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) amax = fmaxf(amax, fabsf(v[j]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float s = block_scale(amax, ue8m0);
  uint32_t p = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) p |= static_cast<uint32_t>(to_e4m3(__fdiv_rn(v[j], s))) << (8 * j);
  *packed = p;
  return s;
}

}  // namespace ds::kernels::fp8
