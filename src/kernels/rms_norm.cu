// RMSNorm: one block per row, fp32 sum of squares reduced with warp shuffles. Memory-bound: each element
// is read once (twice with the fused residual: read x and residual, write residual and out). Rows of whole
// 16-byte chunks keep the row in registers (one load wave); others take the scalar fallback.
#include <cuda_bf16.h>

#include "kernels/fp8_quant.cuh"
#include "kernels/moe_sum.cuh"
#include "kernels/pdl.cuh"
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
  pdl_enter();
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

// Vector path: each thread owns kChunks chunks of 8 elements (16-byte loads) kept in registers, so every
// load of the row is in flight at once and the residual is written once and never re-read.
// kMoe: x is the MoE sum of p.moe (moe_sum.cuh): its routed rows, the addend and the residual go out in one round
// after the wait (the ids before it when settled), and each chunk's sum is rounded to bf16 as the combine's.
// kEarly: an early trigger (pdl.cuh pdl_early; launch_rms_norm says where).
template <int kChunks, bool kMoe = false, bool kEarly = false>
__global__ void __launch_bounds__(kMoe ? 512 : 1024) rms_norm_vec_kernel(RmsNormParams p) {
  // With a flag-joined MoE addend, once it is ready (moe_sum.cuh sum_pdl_enter).
  if constexpr (kEarly) {
    if (!kMoe || !p.moe.addend_ready) pdl_launch_dependents();
  }
  __shared__ float warp_sums[32];
  __shared__ float total;
  __shared__ int32_t moe_rows[kMoe ? moe_detail::kSumMaxTopK : 1];
  __shared__ float moe_wts[kMoe ? moe_detail::kSumMaxTopK : 1];
  const int64_t row = blockIdx.x;
  const int64_t chunks = p.n / 8;
  // A bf16 norm weight (never written by a forward) goes out before the wait: loaded after the row's sum, its cold
  // DRAM read was the last link of the kernel's chain (two such norms a layer). An fp32 one (twice the registers
  // across the sum: the V3 MoE norm spilled) is still read after it.
  uint4 wpre[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(c) * blockDim.x;
    wpre[c] = !p.weight_f32 && i < chunks ? reinterpret_cast<const uint4*>(p.weight)[i] : make_uint4(0u, 0u, 0u, 0u);
  }
  if constexpr (kMoe) {
    moe_detail::sum_enter_with_ids(p.moe, row, moe_rows, moe_wts, kEarly);
  } else {
    pdl_enter();
  }
  const uint4* x = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.x) + row * p.x_stride);
  uint4* res = p.residual ? reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.residual) + row * p.residual_stride)
                          : nullptr;
  uint4* out = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + row * p.out_stride);
  float v[kChunks][8];
  float ss = 0.0f;
  uint4 xa[kChunks], ra[kChunks];
  moe_detail::SumChunk sum[kMoe ? kChunks : 1];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(c) * blockDim.x;
    if (i < chunks) {
      if constexpr (kMoe)
        moe_detail::sum_chunk_load(p.moe, row, i, moe_rows, sum[c]);
      else
        xa[c] = x[i];
      if (res) ra[c] = res[i];
    }
  }
  if constexpr (kMoe) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
      if (threadIdx.x + static_cast<int64_t>(c) * blockDim.x < chunks)
        xa[c] = moe_detail::sum_chunk_reduce(p.moe, moe_rows, moe_wts, sum[c]);
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(c) * blockDim.x;
    if (i >= chunks) continue;
    const __nv_bfloat16* xb = reinterpret_cast<const __nv_bfloat16*>(&xa[c]);
    if (res) {
      uint4 o;
      __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&o);
      const __nv_bfloat16* rb = reinterpret_cast<const __nv_bfloat16*>(&ra[c]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        ob[j] = __float2bfloat16(__bfloat162float(xb[j]) + __bfloat162float(rb[j]));  // the residual stays bf16
        v[c][j] = __bfloat162float(ob[j]);
      }
      res[i] = o;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[c][j] = __bfloat162float(xb[j]);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += v[c][j] * v[c][j];
  }
  float w[kChunks][8];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(c) * blockDim.x;
    if (p.weight_f32) {
      if (i >= chunks) continue;
      const float4* wp = reinterpret_cast<const float4*>(p.weight) + 2 * i;
      const float4 a = wp[0], b = wp[1];
      w[c][0] = a.x, w[c][1] = a.y, w[c][2] = a.z, w[c][3] = a.w, w[c][4] = b.x, w[c][5] = b.y, w[c][6] = b.z,
      w[c][7] = b.w;
    } else {
      const __nv_bfloat16* wb = reinterpret_cast<const __nv_bfloat16*>(&wpre[c]);
#pragma unroll
      for (int j = 0; j < 8; ++j) w[c][j] = __bfloat162float(wb[j]);
    }
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? warp_sums[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
    if (lane == 0) total = w;
  }
  __syncthreads();
  const float inv = rsqrtf(total / static_cast<float>(p.n) + p.eps);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(c) * blockDim.x;
    const bool in = i < chunks;
    uint4 o = make_uint4(0u, 0u, 0u, 0u);
    __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&o);
    if (in) {
#pragma unroll
      for (int j = 0; j < 8; ++j) ob[j] = __float2bfloat16(w[c][j] * (v[c][j] * inv));
      out[i] = o;
    }
    if (p.q) {
      // The bf16 outputs quantized as quant_act would read them. A 128-group is 16 chunks: 16 adjacent lanes
      // (blockDim is a multiple of 32 and n of 128, so a half-warp is wholly in or out of the row).
      float f[8], amax = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        f[j] = __bfloat162float(ob[j]);
        amax = fmaxf(amax, fabsf(f[j]));
      }
#pragma unroll
      for (int m = 8; m > 0; m >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
      const float s = fp8::block_scale(amax, p.q_ue8m0);
      if (in) {
        uint2 packed = make_uint2(0u, 0u);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          packed.x |= static_cast<uint32_t>(fp8::to_e4m3(__fdiv_rn(f[j], s))) << (8 * j);
          packed.y |= static_cast<uint32_t>(fp8::to_e4m3(__fdiv_rn(f[j + 4], s))) << (8 * j);
        }
        reinterpret_cast<uint2*>(p.q + row * p.n)[i] = packed;
        if ((threadIdx.x & 15) == 0) p.q_scales[row * (p.n / 128) + i / 16] = s;
      }
    }
  }
}

bool aligned16(const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; }

// The vector path: rows of whole 16-byte chunks (n, strides multiples of 8; aligned pointers), at most 4
// chunks per thread of a block of <= 1024 threads (n <= 32768).
bool vector_path(const RmsNormParams& p) {
  return p.n % 8 == 0 && p.x_stride % 8 == 0 && p.out_stride % 8 == 0 &&
         (!p.residual || (p.residual_stride % 8 == 0 && aligned16(p.residual))) && aligned16(p.x) &&
         aligned16(p.out) && aligned16(p.weight) && p.n <= 8 * 4 * 1024 && p.rows < (int64_t{1} << 31);
}

// The early trigger's default: a one-row norm that quantizes for FP8 linears (FP8 decode at one token; its next
// launch stages weights only before its wait, pdl.cuh).
bool early_default(const RmsNormParams& p) { return p.q != nullptr && p.rows == 1; }

}  // namespace

bool rms_norm_moe_supported(const RmsNormParams& p) {
  const MoeCombineParams& m = p.moe;
  return vector_path(p) && p.residual && m.y && m.row_of && m.weights && m.top_k >= 1 &&
         m.top_k <= moe_detail::kSumMaxTopK && m.tokens == p.rows && m.dim == p.n && p.n <= 8 * 1024 &&
         aligned16(m.y) && aligned16(m.addend);
}

bool rms_norm_quant_supported(const RmsNormParams& p) {
  return vector_path(p) && p.n % 128 == 0 && p.q && p.q_scales && (reinterpret_cast<uintptr_t>(p.q) & 7) == 0;
}

cudaError_t launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.q && !rms_norm_quant_supported(p)) return cudaErrorInvalidValue;
  if (p.moe.y && !rms_norm_moe_supported(p)) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  if (p.moe.y) {
    // <= 512 threads of <= 2 chunks (the sum's loads take registers: 8 + 8 per chunk).
    const int64_t chunks = p.n / 8;
    const int per = chunks <= 512 ? 1 : 2;
    const int threads = static_cast<int>((chunks + per - 1) / per + 31) / 32 * 32;
    const unsigned grid = static_cast<unsigned>(p.rows);
    if (pdl_early(early_default(p)))
      return per == 1 ? launch_pdl(rms_norm_vec_kernel<1, true, true>, grid, threads, 0, stream, p)
                      : launch_pdl(rms_norm_vec_kernel<2, true, true>, grid, threads, 0, stream, p);
    if (per == 1) return launch_pdl(rms_norm_vec_kernel<1, true>, grid, threads, 0, stream, p);
    return launch_pdl(rms_norm_vec_kernel<2, true>, grid, threads, 0, stream, p);
  }
  const bool vec = vector_path(p);
  if (vec) {
    const int64_t chunks = p.n / 8;
    // Fewest chunks per thread with <= 512 threads (1024 for the largest rows): a decode row is one wave of
    // loads, and large batches keep several blocks per SM.
    const int per = chunks <= 512 ? 1 : chunks <= 1024 ? 2 : chunks <= 2048 ? 4 : 4;
    int threads = static_cast<int>((chunks + per - 1) / per);
    threads = (threads + 31) / 32 * 32;
    const unsigned grid = static_cast<unsigned>(p.rows);
    if (per == 1 && pdl_early(early_default(p)))
      return launch_pdl(rms_norm_vec_kernel<1, false, true>, grid, threads, 0, stream, p);
    if (per == 1) return launch_pdl(rms_norm_vec_kernel<1>, grid, threads, 0, stream, p);
    if (per == 2) return launch_pdl(rms_norm_vec_kernel<2>, grid, threads, 0, stream, p);
    return launch_pdl(rms_norm_vec_kernel<4>, grid, threads, 0, stream, p);
  }
  return launch_pdl(rms_norm_kernel, static_cast<unsigned>(p.rows), kThreads, 0, stream, p);
}

}  // namespace ds::kernels
