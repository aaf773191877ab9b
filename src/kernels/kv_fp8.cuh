// Device-side reads of the packed FP8 latent cache rows (kernels/kv_fp8.h): one value at a time, for the plain
// kernels (the context gather, the reference attention kernel); the decode kernels convert whole tiles.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/kv_fp8.h"

namespace ds::kernels {

__device__ __forceinline__ float fp8_to_float(uint8_t v, __nv_fp8_interpretation_t kind) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(v), kind)));
}

// Four fp8 values (bytes of w, lowest first) times `scale` as four bf16 (two bf16x2 words, lowest first): the
// decode kernels' tile dequantisation.
template <__nv_fp8_interpretation_t kKind>
__device__ __forceinline__ uint2 fp8x4_to_bf16x4(uint32_t w, float scale) {
  uint32_t out[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * h)), kKind);
    const float2 f = __half22float2(__half2(hr));
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
    out[h] = *reinterpret_cast<const uint32_t*>(&b);
  }
  return make_uint2(out[0], out[1]);
}

// Value k (< nope + rope) of a row stored in `format`, as the kernels compute with it: bf16 (e4m3 x scale rounded
// to bf16, as the decode kernels' dequantised tiles and the gather's output hold it).
__device__ __forceinline__ float kv_row_value(const void* row, int format, int64_t nope, int64_t rope, int64_t k) {
  const uint8_t* b = static_cast<const uint8_t*>(row);
  if (format == kKvBf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(row)[k]);
  if (format == kKvE5M2) return fp8_to_float(b[k], __NV_E5M2);
  const KvRowLayout L = kv_row_layout(kKvE4M3, nope, rope);
  if (k >= nope) return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(b + L.rope_off)[k - nope]);
  const float v = fp8_to_float(b[k], __NV_E4M3) * reinterpret_cast<const float*>(b + L.scale_off)[k / 128];
  return __bfloat162float(__float2bfloat16(v));
}

}  // namespace ds::kernels
