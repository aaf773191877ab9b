// One 8-column chunk of the MoE combine (MoeCombineParams, kernels/moe.h): the loads, then the fp32 sum in k
// order. Shared by moe_combine_vec_kernel and the norm that sums an unreduced MoE output itself (rms_norm.cu), so
// both round the same sum to bf16 bit for bit.
#pragma once
#include <cuda_bf16.h>

#include "kernels/moe.h"
#include "kernels/pdl.cuh"

namespace ds::kernels::moe_detail {

constexpr int kSumMaxTopK = 9;  // loads in flight per thread (registers): V3's 8 picks + its fused shared expert

// The rows of chunk c8 (16 bytes: columns 8 * c8 ...) of token t, every load issued before any is used.
struct SumChunk {
  uint4 v[kSumMaxTopK];
  float add[8];
};

// rows / wts: token t's row_of / weights (in shared memory); rows < 0 are skipped.
__device__ __forceinline__ void sum_chunk_load(const MoeCombineParams& p, int64_t t, int64_t c8, const int32_t* rows,
                                               SumChunk& s) {
#pragma unroll
  for (int k = 0; k < kSumMaxTopK; ++k)
    if (k < p.top_k && rows[k] >= 0)
      s.v[k] = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.y) + static_cast<int64_t>(rows[k]) * p.dim)[c8];
#pragma unroll
  for (int j = 0; j < 8; ++j) s.add[j] = 0.0f;
  if (p.addend) {
    if (p.addend_f32) {
      const float4* a = reinterpret_cast<const float4*>(static_cast<const float*>(p.addend) + t * p.dim) + 2 * c8;
      const float4 lo = a[0], hi = a[1];
      s.add[0] = lo.x, s.add[1] = lo.y, s.add[2] = lo.z, s.add[3] = lo.w;
      s.add[4] = hi.x, s.add[5] = hi.y, s.add[6] = hi.z, s.add[7] = hi.w;
    } else {
      const uint4 a = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.addend) + t * p.dim)[c8];
      const __nv_bfloat16* ab = reinterpret_cast<const __nv_bfloat16*>(&a);
#pragma unroll
      for (int j = 0; j < 8; ++j) s.add[j] = __bfloat162float(ab[j]);
    }
  }
}

// The chunk's sum rounded to bf16 once (the combine's output).
__device__ __forceinline__ uint4 sum_chunk_reduce(const MoeCombineParams& p, const int32_t* rows, const float* wts,
                                                  const SumChunk& s) {
  float acc[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
#pragma unroll
  for (int k = 0; k < kSumMaxTopK; ++k) {
    if (k < p.top_k && rows[k] >= 0) {
      const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&s.v[k]);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += wts[k] * __bfloat162float(b[j]);
    }
  }
  if (p.addend) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] += s.add[j];
  }
  uint4 o;
  __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
  for (int j = 0; j < 8; ++j) ob[j] = __float2bfloat16(acc[j]);
  return o;
}

// Token t's row_of / weights into shared memory (threads 0 .. top_k - 1).
__device__ __forceinline__ void sum_load_ids(const MoeCombineParams& p, int64_t t, int32_t* rows, float* wts) {
  if (threadIdx.x < p.top_k) {
    rows[threadIdx.x] = p.row_of[t * p.top_k + threadIdx.x];
    wts[threadIdx.x] = p.weights[t * p.top_k + threadIdx.x];
  }
}

// The kernel's pdl_enter with token t's ids loaded around it: before the wait when p.ids_settled (written two
// launches back or more: pdl.cuh), after it otherwise; then a block barrier, so every thread sees them.
__device__ __forceinline__ void sum_enter_with_ids(const MoeCombineParams& p, int64_t t, int32_t* rows, float* wts) {
  if (p.ids_settled) sum_load_ids(p, t, rows, wts);
  pdl_enter();
  if (!p.ids_settled) sum_load_ids(p, t, rows, wts);
  __syncthreads();
}

}  // namespace ds::kernels::moe_detail
