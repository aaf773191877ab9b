// Fused absorbed-MLA input kernels (see mla_fused.h).
#include "kernels/mla_fused.h"
#include "kernels/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace ds::kernels {
namespace {

constexpr int kStoreThreads = 128;
constexpr int kMaxHalf = 128;  // rope / 2 held in shared memory

// The token's rope angles once, in double as kernels/rope_cache.cu does (exact past the original window; sincosf
// measured no faster here: these kernels are bound by their dependent global loads, not the angles).
__device__ __forceinline__ void rope_angles(float pos, const float* inv_freq, int half, float attn_factor, float* cs,
                                            float* sn) {
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = __fmul_rn(pos, inv_freq[i]);
    double s, c;
    sincos(static_cast<double>(angle), &s, &c);
    cs[i] = static_cast<float>(c) * attn_factor;
    sn[i] = static_cast<float>(s) * attn_factor;
  }
}

// One block per token: sum of squares of the latent (block reduction), then the normalised latent and the
// rotated key written to the slot.
__global__ void __launch_bounds__(kStoreThreads) mla_store_latent_kernel(MlaStoreLatentParams p) {
  pdl_enter();
  __shared__ float cs[kMaxHalf], sn[kMaxHalf];
  __shared__ float warp_ss[kStoreThreads / 32];
  const int64_t t = blockIdx.x;
  const int32_t slot = p.slot_mapping[t];
  if (slot < 0 || slot >= p.num_slots) return;  // block-uniform
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.kv_a) + t * p.ld_kv;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.cache) + static_cast<int64_t>(slot) * (p.lora + p.rope);
  const int half = static_cast<int>(p.rope / 2);
  rope_angles(static_cast<float>(p.positions[t]), p.inv_freq, half, p.attn_factor, cs, sn);
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.lora; i += blockDim.x) {
    const float v = __bfloat162float(x[i]);
    ss += v * v;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) warp_ss[threadIdx.x / 32] = ss;
  __syncthreads();  // also publishes cs / sn
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kStoreThreads / 32; ++w) total += warp_ss[w];
  const float inv = rsqrtf(total / static_cast<float>(p.lora) + p.eps);
  for (int64_t i = threadIdx.x; i < p.lora; i += blockDim.x) {
    const float w = p.w_f32 ? static_cast<const float*>(p.w)[i] : __bfloat162float(static_cast<const __nv_bfloat16*>(p.w)[i]);
    out[i] = __float2bfloat16(__bfloat162float(x[i]) * inv * w);
  }
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float x0 = __bfloat162float(x[p.lora + 2 * i]), x1 = __bfloat162float(x[p.lora + 2 * i + 1]);
    out[p.lora + 2 * i] = __float2bfloat16(x0 * cs[i] - x1 * sn[i]);
    out[p.lora + 2 * i + 1] = __float2bfloat16(x1 * cs[i] + x0 * sn[i]);
  }
}

// One block per token: the angles once, then every head's rope part rotated into dst.
__global__ void __launch_bounds__(kStoreThreads) rope_copy_kernel(RopeCopyParams p) {
  pdl_enter();
  __shared__ float cs[kMaxHalf], sn[kMaxHalf];
  const int64_t t = blockIdx.x;
  const int half = static_cast<int>(p.rope / 2);
  rope_angles(static_cast<float>(p.positions[t]), p.inv_freq, half, p.attn_factor, cs, sn);
  __syncthreads();
  const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(p.src) + t * p.heads * p.src_head_dim + p.src_off;
  __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(p.dst) + t * p.heads * p.dst_head_dim + p.dst_off;
  for (int64_t k = threadIdx.x; k < p.heads * half; k += blockDim.x) {
    const int64_t h = k / half;
    const int i = static_cast<int>(k % half);
    const __nv_bfloat16* s = src + h * p.src_head_dim;
    __nv_bfloat16* d = dst + h * p.dst_head_dim;
    const float x0 = __bfloat162float(s[2 * i]), x1 = __bfloat162float(s[2 * i + 1]);
    d[2 * i] = __float2bfloat16(x0 * cs[i] - x1 * sn[i]);
    d[2 * i + 1] = __float2bfloat16(x1 * cs[i] + x0 * sn[i]);
  }
}

// One block per token; warp w takes the 128-value groups w, w + 4, ... of the latent (amax by shuffles).
__global__ void __launch_bounds__(kStoreThreads) kv_round_store_kernel(KvRoundStoreParams p) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int32_t slot = p.slot_mapping[t];
  if (slot < 0 || slot >= p.num_slots) return;
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.rows) + t * p.dim;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.cache) + static_cast<int64_t>(slot) * p.dim;
  if (p.e5m2) {
    for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) {
      const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(__bfloat162float(x[i]), __NV_NOSAT, __NV_E5M2);
      out[i] = __float2bfloat16(__half2float(__half(__nv_cvt_fp8_to_halfraw(q, __NV_E5M2))));
    }
    return;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t groups = (p.nope + 127) / 128;
  for (int64_t g = warp; g < groups; g += kStoreThreads / 32) {
    float v[4];
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t k = g * 128 + lane + 32 * j;
      v[j] = k < p.nope ? __bfloat162float(x[k]) : 0.0f;
      amax = fmaxf(amax, fabsf(v[j]));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = fmaxf(amax, 1e-4f) / 448.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t k = g * 128 + lane + 32 * j;
      if (k >= p.nope) continue;
      const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(__fdiv_rn(v[j], s), __NV_SATFINITE, __NV_E4M3);
      out[k] = __float2bfloat16(__half2float(__half(__nv_cvt_fp8_to_halfraw(q, __NV_E4M3))) * s);
    }
  }
  for (int64_t i = p.nope + threadIdx.x; i < p.dim; i += blockDim.x) out[i] = x[i];
}

}  // namespace

cudaError_t launch_kv_round_store(const KvRoundStoreParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.dim <= 0 || p.nope < 0 || p.nope > p.dim) return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  if (p.tokens > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_pdl(kv_round_store_kernel, static_cast<unsigned>(p.tokens), kStoreThreads, 0, stream, p);
}

cudaError_t launch_mla_store_latent(const MlaStoreLatentParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.lora <= 0 || p.rope < 0 || p.rope % 2 != 0 || p.rope / 2 > kMaxHalf || p.ld_kv < p.lora + p.rope)
    return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  if (p.tokens > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_pdl(mla_store_latent_kernel, static_cast<unsigned>(p.tokens), kStoreThreads, 0, stream, p);
}

cudaError_t launch_rope_copy(const RopeCopyParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.heads <= 0 || p.rope < 0 || p.rope % 2 != 0 || p.rope / 2 > kMaxHalf ||
      p.src_off + p.rope > p.src_head_dim || p.dst_off + p.rope > p.dst_head_dim)
    return cudaErrorInvalidValue;
  if (p.tokens == 0 || p.rope == 0) return cudaSuccess;
  if (p.tokens > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_pdl(rope_copy_kernel, static_cast<unsigned>(p.tokens), kStoreThreads, 0, stream, p);
}

}  // namespace ds::kernels
