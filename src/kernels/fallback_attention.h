// TEMPORARY fallback for MLA attention (both forms of ops/ops.h) until the real MLA kernels
// (src/kernels/mla_*, src/ops/cuda/attention*.cpp) land: one block per (token, head), scores through a
// global scratch buffer, fp32 softmax. Correct, not fast. Delete together with ops/cuda/fallback_attention.cpp.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

struct FallbackAttnParams {
  bool absorbed;             // absorbed MQA form over the paged cache; else MHA form over gathered rows
  const void* q;             // [T, H, dq] bf16
  const void* kv;            // MHA: [S, H, nope + v] bf16
  const void* ctx;           // MHA: [S, ctx_dim] bf16 (rope key at [rope_offset, ctx_dim))
  const void* cache;         // absorbed: [slots, dq] bf16; value = first v columns
  const int32_t* positions;  // [T]
  const int32_t* q_starts;   // [num_seqs + 1]
  const int32_t* seq_lens;   // [num_seqs]
  const int32_t* block_table;
  const int32_t* topk;       // [T, topk_k] or null
  void* out;                 // [T, H, v] bf16
  float* lse;                // MHA: [T, H] ln sum exp(scale * score) (-inf: no key; out 0), or null
  float* scores;             // scratch [T * H, max_cand]
  int64_t tokens, heads, dq, nope, v, ctx_dim, rope_offset, max_pages;
  int num_seqs, page_size, max_cand, topk_k;
  float scale;
};
cudaError_t launch_fallback_attention(const FallbackAttnParams& p, cudaStream_t stream);

}  // namespace ds::kernels
