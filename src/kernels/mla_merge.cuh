// The split-KV merge step shared by the split combine kernels (mla_decode.cu), the transposed decode kernel's
// in-cluster merge (mla_decode_t16.cu) and the prefill's context-chunk merge (mla_prefill.cu): the weighted sum of
// several splits' normalised partials against their largest log2-sum-exp.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

namespace ds::kernels {

// The weighted sum of n split partials (one lane's 4 columns) against their own maximum *m, skipping splits of zero
// weight (a -inf log-sum-exp: nothing attended, O never written, its x whatever was loaded): sum_s 2^(lse_s - m) x_s,
// and *l = sum_s 2^(lse_s - m). The one-round merges of both combine kernels and of the transposed
// kernel's cluster merge.
template <int kN>
__device__ __forceinline__ float4 weigh_splits(const float (&lse)[kN], const float4 (&x)[kN], float* m, float* l) {
  float mx = -INFINITY;
#pragma unroll
  for (int s = 0; s < kN; ++s) mx = fmaxf(mx, lse[s]);
  float sum = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int s = 0; s < kN; ++s) {
    const float wt = lse[s] != -INFINITY ? exp2f(lse[s] - mx) : 0.0f;
    if (wt != 0.0f) {
      sum += wt;
      acc.x += wt * x[s].x;
      acc.y += wt * x[s].y;
      acc.z += wt * x[s].z;
      acc.w += wt * x[s].w;
    }
  }
  *m = mx;
  *l = sum;
  return acc;
}

// The natural log-sum-exp of a row whose online softmax ended at maximum m and sum l = sum_j 2^(s_j - m), s_j in
// log2 units (the prefill kernels' scores times scale * log2(e)): -inf where the row attended nothing (l = 0).
__device__ __forceinline__ float natural_lse(float m, float l) {
  return l > 0.0f ? (m + log2f(l)) * 0.6931471805599453f : -INFINITY;
}

}  // namespace ds::kernels
