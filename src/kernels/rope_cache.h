// Rotary embedding (interleaved or NeoX pairs, fp32 math) and the paged latent-cache row kernels:
// store_rows (new rows -> their slots) and gather_context (every sequence's context rows in order).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// Rotates dims [rot_offset, rot_offset + rot_dim) of each head of x [tokens, heads, head_dim] (bf16) in
// place: angle = positions[t] * inv_freq[i] (fp32 product), cos/sin scaled by attn_factor.
struct RopeParams {
  void* x;
  const int32_t* positions;  // [tokens]
  const float* inv_freq;     // [rot_dim / 2]
  int64_t tokens, heads, head_dim;
  int64_t rot_offset, rot_dim;
  float attn_factor;
  bool interleaved;  // pairs (2i, 2i + 1); else (i, i + rot_dim / 2)
};
cudaError_t launch_rope(const RopeParams& p, cudaStream_t stream);

// cache[slot_mapping[t], :] = rows[t, :]; rows with a slot outside [0, num_slots) are skipped.
struct StoreRowsParams {
  void* cache;
  const void* rows;
  const int32_t* slot_mapping;
  int64_t tokens, num_slots, row_bytes;
};
cudaError_t launch_store_rows(const StoreRowsParams& p, cudaStream_t stream);

// out[ctx_start(s) + p, :] = cache[block_table[s][p / page_size] * page_size + p % page_size, :] for
// p < seq_lens[s], where ctx_start(s) = sum of seq_lens before s.
struct GatherContextParams {
  const void* cache;
  void* out;
  const int32_t* seq_lens;     // [num_seqs]
  const int32_t* block_table;  // [num_seqs, max_pages]
  int num_seqs;
  int max_seq_len;
  int page_size;
  int64_t max_pages, row_bytes;
};
cudaError_t launch_gather_context(const GatherContextParams& p, cudaStream_t stream);

// gather_context of a packed FP8 latent cache (kernels/kv_fp8.h), dequantised: out [sum(seq_lens), nope + rope]
// bf16 = the stored values (e4m3 x block scale, bf16 rope, or e5m2).
struct GatherLatentParams {
  const void* cache;  // [slots, row_bytes] in `format`
  void* out;
  const int32_t* seq_lens;
  const int32_t* block_table;
  int num_seqs;
  int max_seq_len;
  int page_size;
  int64_t max_pages, nope, rope;
  int format;
};
cudaError_t launch_gather_latent(const GatherLatentParams& p, cudaStream_t stream);

}  // namespace ds::kernels
