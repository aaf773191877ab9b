// Fused absorbed-MLA input kernels (see mla_fused.h).
#include "kernels/mla_fused.h"
#include "kernels/fp8_quant.cuh"
#include "kernels/kv_fp8.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

#include <algorithm>
#include <cstdint>

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

__device__ __forceinline__ float bf16_round(float v) { return __bfloat162float(__float2bfloat16(v)); }

// Writes one latent row (fp32 values in shared memory, [nope | rope]) to `dst` in a packed format
// (kernels/kv_fp8.h). The whole block calls it; warp w quantises the 128-value groups w, w + warps, ... (amax
// by shuffles). Bytes past the parts (row padding) are left as they are.
__device__ void write_packed_row(const float* row, uint8_t* dst, int64_t nope, int64_t rope, int format) {
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (format == kKvE5M2) {
    for (int64_t i = threadIdx.x; i < nope + rope; i += blockDim.x)
      dst[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(row[i], __NV_NOSAT, __NV_E5M2));
    return;
  }
  const KvRowLayout L = kv_row_layout(kKvE4M3, nope, rope);
  const int64_t groups = (nope + 127) / 128;
  for (int64_t g = warp; g < groups; g += warps) {
    float amax = 0.0f;
    for (int64_t k = g * 128 + lane; k < min(nope, g * 128 + 128); k += 32) amax = fmaxf(amax, fabsf(row[k]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = fp8::block_scale(amax, false);
    for (int64_t k = g * 128 + lane; k < min(nope, g * 128 + 128); k += 32) dst[k] = fp8::to_e4m3(__fdiv_rn(row[k], s));
    if (lane == 0) reinterpret_cast<float*>(dst + L.scale_off)[g] = s;
  }
  __nv_bfloat16* rp = reinterpret_cast<__nv_bfloat16*>(dst + L.rope_off);
  for (int64_t i = threadIdx.x; i < rope; i += blockDim.x) rp[i] = __float2bfloat16(row[nope + i]);
}

// Norm-weight values of the latent a thread holds in registers from before the dependency wait (lora <= 8 x 128;
// past that the rest are read where used).
constexpr int kLatentWRegs = 8;

// Token t's latent row: sum of squares of the latent (block reduction), then the normalised latent and the
// rotated key written to the slot. row_s: (lora + rope) floats of shared memory (packed formats). Makes the
// kernel's pdl_enter: the slot, the position and its angles (step metadata the host uploads before the forward,
// pdl.cuh) and the norm weight (never written by a forward) are read before it, so after it only the kv_a row
// is (its cold norm weight and the angles' chain of reads were the block's longest path).
__device__ void store_latent_token(const MlaStoreLatentParams& p, int64_t t, float* row_s) {
  __shared__ float cs[kMaxHalf], sn[kMaxHalf];
  __shared__ float warp_ss[kStoreThreads / 32];
  const int32_t slot = p.slot_mapping[t];
  if (slot < 0 || slot >= p.num_slots) {  // block-uniform
    pdl_enter();
    return;
  }
  const int half = static_cast<int>(p.rope / 2);
  rope_angles(static_cast<float>(p.positions[t]), p.inv_freq, half, p.attn_factor, cs, sn);
  float wr[kLatentWRegs];
  auto weight_at = [&](int64_t i) {
    return p.w_f32 ? static_cast<const float*>(p.w)[i] : __bfloat162float(static_cast<const __nv_bfloat16*>(p.w)[i]);
  };
#pragma unroll
  for (int k = 0; k < kLatentWRegs; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    wr[k] = i < p.lora ? weight_at(i) : 0.0f;
  }
  pdl_enter();
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.kv_a) + t * p.ld_kv;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.cache) + static_cast<int64_t>(slot) * (p.lora + p.rope);
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
  // The row's values, each handed to put(index, value): the normalised latent, then the rotated key.
  auto emit = [&](auto put) {
#pragma unroll
    for (int k = 0; k < kLatentWRegs; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (i < p.lora) put(i, __bfloat162float(x[i]) * inv * wr[k]);
    }
    for (int64_t i = threadIdx.x + static_cast<int64_t>(kLatentWRegs) * blockDim.x; i < p.lora; i += blockDim.x)
      put(i, __bfloat162float(x[i]) * inv * weight_at(i));
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      const float x0 = __bfloat162float(x[p.lora + 2 * i]), x1 = __bfloat162float(x[p.lora + 2 * i + 1]);
      put(p.lora + 2 * i, x0 * cs[i] - x1 * sn[i]);
      put(p.lora + 2 * i + 1, x1 * cs[i] + x0 * sn[i]);
    }
  };
  if (p.format == kKvBf16) {
    emit([&](int64_t i, float v) { out[i] = __float2bfloat16(v); });
    return;
  }
  // Packed: the bf16-rounded row in shared memory, then quantised.
  emit([&](int64_t i, float v) { row_s[i] = bf16_round(v); });
  __syncthreads();
  const int64_t row_bytes = kv_row_layout(p.format, p.lora, p.rope).row_bytes;
  write_packed_row(row_s, static_cast<uint8_t*>(p.cache) + slot * row_bytes, p.lora, p.rope, p.format);
}

// One block per token.
__global__ void __launch_bounds__(kStoreThreads) mla_store_latent_kernel(MlaStoreLatentParams p) {
  extern __shared__ float row_s[];
  store_latent_token(p, blockIdx.x, row_s);
}

// Token t: the angles once (before the kernel's pdl_enter, which this makes: the position is step metadata the host
// uploads before the forward), then every head's rope part rotated into dst.
__device__ void rope_copy_token(const RopeCopyParams& p, int64_t t) {
  __shared__ float cs[kMaxHalf], sn[kMaxHalf];
  const int half = static_cast<int>(p.rope / 2);
  rope_angles(static_cast<float>(p.positions[t]), p.inv_freq, half, p.attn_factor, cs, sn);
  pdl_enter();
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

__global__ void __launch_bounds__(kStoreThreads) rope_copy_kernel(RopeCopyParams p) {
  rope_copy_token(p, blockIdx.x);
}

// The absorbed-query product of one (head, 128 output columns) CTA: 16 column groups of 8 x 8 k groups; the
// weights (never written by a forward) are loaded into registers before the dependency wait, q after it; the k
// groups' sums meet in shared memory (sm: T * nope + 8 * T * 128 floats). kT: the token bucket (T <= kT; 1, 2, 4 or
// 8): one body unrolled for 8 tokens with early exits left batch 1 a long cold straight line (s65g's source page:
// 24-28% of its samples on no_instruction).
constexpr int kPrepCols = 128;
constexpr int kPrepKGroups = kStoreThreads / (kPrepCols / 8);  // 8
constexpr int kPrepKIter = kMlaPrepMaxNope / kPrepKGroups;     // 16
template <int kT>
__device__ void absorb_product(const MlaAbsorbPrepParams& p, int64_t b, float* sm) {
  const RopeCopyParams& r = p.rope;
  const int64_t T = r.tokens, H = r.heads, nope = p.nope, lora = p.lora;
  const int64_t cbs = (lora + kPrepCols - 1) / kPrepCols;
  const int64_t h = b / cbs, c0 = (b % cbs) * kPrepCols;
  const int cg = threadIdx.x & 15, kg = threadIdx.x >> 4;
  const int64_t col = c0 + 8 * cg;
  const bool active = col < lora;
  const __nv_bfloat16* w = static_cast<const __nv_bfloat16*>(p.w_kc) + h * nope * lora + col;
  uint4 wv[kPrepKIter];
#pragma unroll
  for (int i = 0; i < kPrepKIter; ++i) {
    const int64_t k = kg + kPrepKGroups * i;
    wv[i] = active && k < nope ? *reinterpret_cast<const uint4*>(w + k * lora) : make_uint4(0, 0, 0, 0);
  }
  pdl_enter();
  float* q_s = sm;             // [T][nope]
  float* red = sm + T * nope;  // [k group][T][128]
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(r.src);
  for (int64_t idx = threadIdx.x; idx < T * nope; idx += blockDim.x) {
    const int64_t t = idx / nope, k = idx % nope;
    q_s[idx] = __bfloat162float(q[(t * H + h) * r.src_head_dim + k]);
  }
  __syncthreads();
  float acc[kT][8] = {};
#pragma unroll
  for (int i = 0; i < kPrepKIter; ++i) {
    const int64_t k = kg + kPrepKGroups * i;
    if (k >= nope) break;
    ptx::fma_bf16x8(acc, wv[i], q_s + k, static_cast<int>(nope), static_cast<int>(T));
  }
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t >= T) break;
#pragma unroll
    for (int j = 0; j < 8; ++j) red[(kg * T + t) * kPrepCols + 8 * cg + j] = acc[t][j];
  }
  __syncthreads();
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(r.dst);
  for (int64_t idx = threadIdx.x; idx < T * kPrepCols; idx += blockDim.x) {
    const int64_t t = idx / kPrepCols, c = idx % kPrepCols;
    if (c0 + c >= lora) continue;
    float sum = 0.0f;
#pragma unroll
    for (int g = 0; g < kPrepKGroups; ++g) sum += red[(g * T + t) * kPrepCols + c];
    out[(t * H + h) * r.dst_head_dim + c0 + c] = __float2bfloat16(sum);
  }
}

// Blocks [0, T): the latent rows (when stored); [T, 2 T): the query's rope parts; then the products.
template <int kT>
__global__ void __launch_bounds__(kStoreThreads) mla_absorb_prep_kernel(MlaAbsorbPrepParams p) {
  extern __shared__ float prep_s[];
  const int64_t T = p.rope.tokens, b = blockIdx.x;
  const int64_t stores = p.store.tokens;
  if (b < stores) {
    store_latent_token(p.store, b, prep_s);
  } else if (b < stores + T) {
    rope_copy_token(p.rope, b - stores);
  } else {
    absorb_product<kT>(p, b - stores - T, prep_s);
  }
}

// One block per token: the row into shared memory as fp32, then packed.
__global__ void __launch_bounds__(kStoreThreads) kv_pack_store_kernel(KvPackStoreParams p) {
  pdl_enter();
  extern __shared__ float row_s[];
  const int64_t t = blockIdx.x;
  const int32_t slot = p.slot_mapping[t];
  if (slot < 0 || slot >= p.num_slots) return;  // block-uniform
  const int64_t D = p.nope + p.rope;
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.rows) + t * D;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) row_s[i] = __bfloat162float(x[i]);
  __syncthreads();
  const int64_t row_bytes = kv_row_layout(p.format, p.nope, p.rope).row_bytes;
  write_packed_row(row_s, static_cast<uint8_t*>(p.cache) + slot * row_bytes, p.nope, p.rope, p.format);
}

}  // namespace

constexpr int64_t kMaxPackedDim = 8192;  // fp32 row in shared memory: 32 KB

cudaError_t launch_kv_pack_store(const KvPackStoreParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.nope < 0 || p.rope < 0 || p.nope + p.rope <= 0 || p.nope + p.rope > kMaxPackedDim ||
      (p.format != kKvE4M3 && p.format != kKvE5M2))
    return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  if (p.tokens > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_pdl(kv_pack_store_kernel, static_cast<unsigned>(p.tokens), kStoreThreads,
                    static_cast<size_t>(p.nope + p.rope) * 4, stream, p);
}

cudaError_t launch_mla_store_latent(const MlaStoreLatentParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.lora <= 0 || p.rope < 0 || p.rope % 2 != 0 || p.rope / 2 > kMaxHalf || p.ld_kv < p.lora + p.rope ||
      p.format < kKvBf16 || p.format > kKvE5M2 || (p.format != kKvBf16 && p.lora + p.rope > kMaxPackedDim))
    return cudaErrorInvalidValue;
  if (p.tokens == 0) return cudaSuccess;
  if (p.tokens > 0x7fffffff) return cudaErrorInvalidValue;
  const size_t smem = p.format == kKvBf16 ? 0 : static_cast<size_t>(p.lora + p.rope) * 4;
  return launch_pdl(mla_store_latent_kernel, static_cast<unsigned>(p.tokens), kStoreThreads, smem, stream, p);
}

cudaError_t launch_mla_absorb_prep(const MlaAbsorbPrepParams& p, cudaStream_t stream) {
  const RopeCopyParams& r = p.rope;
  const MlaStoreLatentParams& st = p.store;
  if (r.tokens < 0 || r.tokens > kMlaPrepMaxTokens || r.heads <= 0 || p.nope <= 0 || p.nope > kMlaPrepMaxNope ||
      p.lora <= 0 || p.lora % 8 != 0 || r.src_off != p.nope || r.dst_off != p.lora || r.rope % 2 != 0 ||
      r.rope / 2 > kMaxHalf || r.src_head_dim != p.nope + r.rope || r.dst_head_dim != p.lora + r.rope ||
      (reinterpret_cast<uintptr_t>(p.w_kc) & 15) || (st.tokens != 0 && st.tokens != r.tokens))
    return cudaErrorInvalidValue;
  if (st.tokens > 0 && (st.lora <= 0 || st.rope < 0 || st.rope % 2 != 0 || st.rope / 2 > kMaxHalf ||
                        st.ld_kv < st.lora + st.rope || st.format < kKvBf16 || st.format > kKvE5M2 ||
                        (st.format != kKvBf16 && st.lora + st.rope > kMaxPackedDim)))
    return cudaErrorInvalidValue;
  if (r.tokens == 0) return cudaSuccess;
  const int64_t products = r.heads * ((p.lora + kPrepCols - 1) / kPrepCols);
  size_t smem = static_cast<size_t>(r.tokens) * (p.nope + kPrepKGroups * kPrepCols) * 4;
  if (st.tokens > 0 && st.format != kKvBf16) smem = std::max(smem, static_cast<size_t>(st.lora + st.rope) * 4);
  if (smem > 48 * 1024) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(st.tokens + r.tokens + products);
  auto launch = [&](auto kernel) { return launch_pdl(kernel, grid, kStoreThreads, smem, stream, p); };
  switch (r.tokens) {
    case 1: return launch(mla_absorb_prep_kernel<1>);
    case 2: return launch(mla_absorb_prep_kernel<2>);
    case 3:
    case 4: return launch(mla_absorb_prep_kernel<4>);
    default: return launch(mla_absorb_prep_kernel<kMlaPrepMaxTokens>);
  }
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
