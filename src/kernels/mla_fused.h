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
  void* cache;            // [num_slots, lora + rope] bf16, or packed rows of `format` (kernels/kv_fp8.h)
  const int32_t* slot_mapping;
  int64_t tokens, num_slots, lora, rope;
  int format = 0;  // KvFormat; packed formats quantise the bf16-rounded row as launch_kv_pack_store does
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

// The absorbed query and the latent rows of a decode-sized step in one launch (instead of a bmm, a rope copy and a
// store on a side stream, each a few microseconds of latency): rope.dst[t, h, :lora] = rope.src[t, h, :nope] @
// w_kc[h] (bf16 inputs, fp32 sums, bf16 out), rope.dst[t, h, lora:] = the rope part as launch_rope_copy, and
// store's rows as launch_mla_store_latent (store.tokens = 0: none; else = rope.tokens). rope.src_off = nope,
// rope.dst_off = lora; tokens <= kMlaPrepMaxTokens, nope <= kMlaPrepMaxNope, lora % 8 == 0, w_kc 16-byte aligned.
constexpr int kMlaPrepMaxTokens = 8;
constexpr int kMlaPrepMaxNope = 128;
struct MlaAbsorbPrepParams {
  const void* w_kc;  // [heads, nope, lora] bf16
  int64_t nope, lora;
  RopeCopyParams rope;
  MlaStoreLatentParams store;
};
cudaError_t launch_mla_absorb_prep(const MlaAbsorbPrepParams& p, cudaStream_t stream);

// Latent rows into a packed FP8 cache (kernels/kv_fp8.h): cache row slot_mapping[t] = rows[t] ([nope | rope]
// bf16) in `format` (kKvE4M3: the nope values quantised per 128 with s = max(amax, 1e-4) / 448 as ops/fp8.cpp
// fp8_kv_round_trip, the rope part kept; kKvE5M2: every value cast). Slots outside [0, num_slots) are skipped.
struct KvPackStoreParams {
  const void* rows;  // [tokens, nope + rope] bf16
  void* cache;       // [num_slots, row_bytes] packed
  const int32_t* slot_mapping;
  int64_t tokens, num_slots, nope, rope;
  int format = 1;  // KvFormat: kKvE4M3 or kKvE5M2
};
cudaError_t launch_kv_pack_store(const KvPackStoreParams& p, cudaStream_t stream);

}  // namespace ds::kernels
