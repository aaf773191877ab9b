// The end of the MHA-form prefill kernels (mla_prefill.cu's mma.sync kernel, mla_prefill_wgmma.cu): one query row's
// normalised output and log-sum-exp from the thread's share of it (the mma / wgmma accumulator layout: a quad of
// lanes holds a row, each lane columns 8 j + 2 (lane % 4) + {0, 1}).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/mla_merge.cuh"
#include "kernels/mla_prefill.h"
#include "kernels/ptx.cuh"

namespace ds::kernels {

// Row t (pos < 0: a padding row, nothing written) of head h, from the lane's running max m (log2 units) and partial
// sum l (summed over the quad here: every lane must call it) and its column pairs pair(j), j < kV / 8.
template <int kV, class Pair>
__device__ __forceinline__ void store_prefill_row(const MlaPrefillParams& p, int h, int lane, int t, int pos, float m,
                                                  float l, Pair pair) {
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (pos < 0) return;
  const int64_t row = static_cast<int64_t>(t) * p.num_heads + h;
  if (p.lse && (lane & 3) == 0) p.lse[row] = natural_lse(m, l);
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(p.out) + row * kV + 2 * (lane & 3);
#pragma unroll
  for (int j = 0; j < kV / 8; ++j) {
    const float2 v = pair(j);
    *reinterpret_cast<uint32_t*>(dst + 8 * j) = ptx::pack_bf16(v.x * inv, v.y * inv);
  }
}

}  // namespace ds::kernels
