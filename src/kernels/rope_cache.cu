// RoPE and latent-cache row kernels (see rope_cache.h). cos/sin are evaluated in double from the fp32
// angle, as the CPU reference does, so positions past the original window stay exact; once per (token,
// frequency), shared by the heads.
#include <algorithm>

#include <cuda_bf16.h>

#include "kernels/rope_cache.h"
#include "kernels/kv_fp8.cuh"
#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

constexpr int kRopeThreads = 128;
constexpr int kRopePairsPerBlock = 1024;  // (head, pair) rotations per block
constexpr int kRopeMaxHalf = 256;         // rot_dim / 2 held in shared memory

// Block (token, head chunk): the cos/sin of the token's rot_dim / 2 angles once into shared memory (the
// double sincos is the expensive part; every head shares it), then the chunk's heads rotated.
__global__ void __launch_bounds__(kRopeThreads) rope_kernel(RopeParams p, int heads_per_block) {
  pdl_enter();
  __shared__ float cs_s[kRopeMaxHalf], sn_s[kRopeMaxHalf];
  const int64_t t = blockIdx.x;
  const int half = static_cast<int>(p.rot_dim / 2);
  const float pos = static_cast<float>(p.positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = __fmul_rn(pos, p.inv_freq[i]);
    double s, c;
    sincos(static_cast<double>(angle), &s, &c);
    cs_s[i] = static_cast<float>(c) * p.attn_factor;
    sn_s[i] = static_cast<float>(s) * p.attn_factor;
  }
  __syncthreads();
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * heads_per_block;
  const int64_t nh = min(static_cast<int64_t>(heads_per_block), p.heads - h0);
  __nv_bfloat16* xt = static_cast<__nv_bfloat16*>(p.x) + (t * p.heads + h0) * p.head_dim + p.rot_offset;
  for (int64_t k = threadIdx.x; k < nh * half; k += blockDim.x) {
    const int64_t h = k / half;
    const int i = static_cast<int>(k % half);
    const float cs = cs_s[i], sn = sn_s[i];
    __nv_bfloat16* v = xt + h * p.head_dim;
    const int64_t ia = p.interleaved ? 2 * i : i, ib = p.interleaved ? 2 * i + 1 : i + half;
    const float x0 = __bfloat162float(v[ia]), x1 = __bfloat162float(v[ib]);
    v[ia] = __float2bfloat16(x0 * cs - x1 * sn);
    v[ib] = __float2bfloat16(x1 * cs + x0 * sn);
  }
}

// Copies one row of `bytes` bytes with the calling block's threads.
__device__ __forceinline__ void copy_row(char* dst, const char* src, int64_t bytes) {
  if (bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  } else {
    for (int64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  }
}

__global__ void store_rows_kernel(StoreRowsParams p) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int32_t slot = p.slot_mapping[t];
  if (slot < 0 || slot >= p.num_slots) return;
  copy_row(static_cast<char*>(p.cache) + slot * p.row_bytes, static_cast<const char*>(p.rows) + t * p.row_bytes,
           p.row_bytes);
}

constexpr int kGatherRows = 16;  // context rows per block

// Block (sequence s, 16 context positions): fn(slot, output row) for each of its positions, the output row being
// the position's place in the concatenated contexts.
template <class P, class F>
__device__ __forceinline__ void for_context_rows(const P& p, F&& fn) {
  const int s = blockIdx.x;
  const int len = p.seq_lens[s];
  const int first = blockIdx.y * kGatherRows;
  if (first >= len) return;
  int64_t start = 0;
  for (int i = 0; i < s; ++i) start += p.seq_lens[i];
  const int last = min(len, first + kGatherRows);
  for (int pos = first; pos < last; ++pos) {
    const int64_t slot = static_cast<int64_t>(p.block_table[s * p.max_pages + pos / p.page_size]) * p.page_size +
                         pos % p.page_size;
    fn(slot, start + pos);
  }
}

__global__ void gather_context_kernel(GatherContextParams p) {
  pdl_enter();
  for_context_rows(p, [&](int64_t slot, int64_t row) {
    copy_row(static_cast<char*>(p.out) + row * p.row_bytes, static_cast<const char*>(p.cache) + slot * p.row_bytes,
             p.row_bytes);
  });
}

__global__ void gather_latent_kernel(GatherLatentParams p) {
  pdl_enter();
  const int64_t D = p.nope + p.rope, row_bytes = kv_row_layout(p.format, p.nope, p.rope).row_bytes;
  for_context_rows(p, [&](int64_t slot, int64_t row) {
    const uint8_t* src = static_cast<const uint8_t*>(p.cache) + slot * row_bytes;
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + row * D;
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x)
      out[k] = __float2bfloat16(kv_row_value(src, p.format, p.nope, p.rope, k));
  });
}

}  // namespace

cudaError_t launch_rope(const RopeParams& p, cudaStream_t stream) {
  if (p.tokens == 0 || p.rot_dim == 0 || p.heads == 0) return cudaSuccess;
  const int64_t half = p.rot_dim / 2;
  if (half > kRopeMaxHalf) return cudaErrorInvalidValue;
  const int64_t hpb = std::max<int64_t>(1, std::min<int64_t>(p.heads, kRopePairsPerBlock / std::max<int64_t>(half, 1)));
  const int64_t chunks = (p.heads + hpb - 1) / hpb;
  if (p.tokens >= (int64_t{1} << 31) || chunks > 65535) return cudaErrorInvalidValue;
  return launch_pdl(rope_kernel, dim3(static_cast<unsigned>(p.tokens), static_cast<unsigned>(chunks)), kRopeThreads,
                    0, stream, p, static_cast<int>(hpb));
}

cudaError_t launch_store_rows(const StoreRowsParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  return launch_pdl(store_rows_kernel, static_cast<unsigned>(p.tokens), 128, 0, stream, p);
}

cudaError_t launch_gather_context(const GatherContextParams& p, cudaStream_t stream) {
  if (p.num_seqs == 0 || p.max_seq_len == 0) return cudaSuccess;
  dim3 grid(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>((p.max_seq_len + kGatherRows - 1) / kGatherRows));
  return launch_pdl(gather_context_kernel, grid, 128, 0, stream, p);
}

cudaError_t launch_gather_latent(const GatherLatentParams& p, cudaStream_t stream) {
  if (p.format != kKvE4M3 && p.format != kKvE5M2) return cudaErrorInvalidValue;
  if (p.num_seqs == 0 || p.max_seq_len == 0) return cudaSuccess;
  dim3 grid(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>((p.max_seq_len + kGatherRows - 1) / kGatherRows));
  return launch_pdl(gather_latent_kernel, grid, 128, 0, stream, p);
}

}  // namespace ds::kernels
