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

// MoeCombineParams::addend_ready: thread 0 waits for the signal (acquire loads, backing off to 256 ns so a wait
// beside busy kernels takes few issue slots), counts its CTA in, and the grid's last CTA sets both words back to 0.
__device__ __forceinline__ void wait_addend_ready(const MoeCombineParams& p) {
  if (!p.addend_ready || threadIdx.x != 0) return;
  uint32_t v = 0, nap = 16;
  for (;;) {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p.addend_ready) : "memory");
    if (v != 0) break;
    __nanosleep(nap);
    nap = nap < 256 ? 2 * nap : 256;
  }
  const uint32_t ctas = gridDim.x * gridDim.y * gridDim.z;
  if (atomicAdd(p.addend_ready + 1, 1u) + 1 == ctas) {  // every CTA has seen the signal: reset for the next one
    p.addend_ready[1] = 0;
    p.addend_ready[0] = 0;
  }
}

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
      const float4 lo = __ldcg(a), hi = __ldcg(a + 1);
      s.add[0] = lo.x, s.add[1] = lo.y, s.add[2] = lo.z, s.add[3] = lo.w;
      s.add[4] = hi.x, s.add[5] = hi.y, s.add[6] = hi.z, s.add[7] = hi.w;
    } else {
      const uint4* a = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.addend) + t * p.dim) + c8;
      const uint4 av = __ldcg(a);
      const __nv_bfloat16* ab = reinterpret_cast<const __nv_bfloat16*>(&av);
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

// pdl_enter for a consumer of p. With a flag-joined addend, its signal first (the writer is on another stream, so
// this may come before the PDL wait: the consumer, started early, has it in hand when its own stream's previous kernel
// ends; waiting for it after the PDL wait put ~1 us of serial loads on the chain), a block barrier, then the
// dependents' launch (with `early`, before the wait) and the wait. Addend loads go to the L2 (__ldcg in
// sum_chunk_load). Never the dependents before the signal: a consumer that let the next launch start while it waits
// could fill the SMs with CTAs that wait on it, and the addend's writer, still to be scheduled, would never run.
__device__ __forceinline__ void sum_pdl_enter(const MoeCombineParams& p, bool early = false) {
  if (!p.addend_ready) return pdl_enter();
  wait_addend_ready(p);
  __syncthreads();
  if (early) pdl_launch_dependents();
  pdl_enter();
}

// The kernel's sum_pdl_enter with token t's ids loaded around it: before the wait when p.ids_settled (written two
// launches back or more: pdl.cuh), after it otherwise; then a block barrier, so every thread sees them.
// `early`: sum_pdl_enter's.
__device__ __forceinline__ void sum_enter_with_ids(const MoeCombineParams& p, int64_t t, int32_t* rows, float* wts,
                                                   bool early = false) {
  if (p.ids_settled) sum_load_ids(p, t, rows, wts);
  sum_pdl_enter(p, early);
  if (!p.ids_settled) sum_load_ids(p, t, rows, wts);
  __syncthreads();
}

}  // namespace ds::kernels::moe_detail
