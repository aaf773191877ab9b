// Fused absorbed-MLA input kernels: the latent cache write (RMSNorm of the latent + RoPE of the shared key,
// straight into the token's cache slot) and the RoPE of the query's rope part into the absorbed query. Each
// replaces a chain of copy / norm / rope / store launches of a decode step (see Ops::mla_store_latent,
// Ops::mla_absorb_q for the semantics).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// cache[slot_mapping[t], :lora] = bf16(kv_a[t, :lora] * rsqrt(mean(kv_a[t, :lora]^2) + eps) * w),
// cache[slot_mapping[t], lora:] = interleaved RoPE of kv_a[t, lora:] (angle positions[t] * inv_freq[i], cos/sin
// scaled by attn_factor; cos/sin in double as the rope kernel). Tokens with a slot outside [0, num_slots) are
// skipped. All bf16 except w (bf16, or fp32 with w_f32), positions/slots int32, inv_freq fp32.
struct MlaStoreLatentParams {
  const void* kv_a;  // [tokens, lora + rope], row stride ld_kv
  int64_t ld_kv;
  const void* w;     // [lora]
  bool w_f32 = false;
  const int32_t* positions;
  const float* inv_freq;  // [rope / 2]
  float attn_factor, eps;
  void* cache;            // [num_slots, lora + rope]
  const int32_t* slot_mapping;
  int64_t tokens, num_slots, lora, rope;
};
cudaError_t launch_mla_store_latent(const MlaStoreLatentParams& p, cudaStream_t stream);

// dst[t, h, dst_off + j] = interleaved RoPE of src[t, h, src_off + j] for j < rope (bf16, same angles as above).
struct RopeCopyParams {
  const void* src;
  void* dst;
  const int32_t* positions;
  const float* inv_freq;
  float attn_factor;
  int64_t tokens, heads, src_head_dim, src_off, dst_head_dim, dst_off, rope;
};
cudaError_t launch_rope_copy(const RopeCopyParams& p, cudaStream_t stream);

// The FP8 KV cache's values in a bf16 cache (ops.h KvCacheDtype): cache[slot_mapping[t]] = rows[t] with the
// first `nope` values rounded through e4m3 with one scale per 128 (s = max(amax, 1e-4) / 448, as
// ops/fp8.cpp fp8_kv_round_trip) and the rest kept (e4m3 mode), or every value rounded through e5m2. The
// values are what FlashMLA's packed layout holds; the storage stays bf16 (no memory saving yet).
struct KvRoundStoreParams {
  const void* rows;  // [tokens, dim] bf16
  void* cache;       // [num_slots, dim] bf16
  const int32_t* slot_mapping;
  int64_t tokens, num_slots, dim, nope;
  bool e5m2 = false;
};
cudaError_t launch_kv_round_store(const KvRoundStoreParams& p, cudaStream_t stream);

}  // namespace ds::kernels
