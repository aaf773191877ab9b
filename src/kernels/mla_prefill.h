// MLA attention in MHA form (prefill, chunked prefill over a cached prefix): a flash-attention kernel on
// tensor cores for the real head dims (qk 128 + 64, v 128), a plain reference kernel for any dims, and the
// DSA top-k list -> per-token bitmask conversion both use. Raw pointers + POD parameters; no allocation.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// Semantics of ops/ops.h mla_attention_mha: sequence s owns query tokens [q_starts[s], q_starts[s+1]) and
// context rows [sum_{s'<s} seq_lens[s'], + seq_lens[s]) of kv/ctx (its positions 0 .. seq_lens[s]-1); query
// t attends positions j <= positions[t] (and, with `allow`, only those whose bit is set). A row that attends no
// position (a sequence of length 0) gets zeros, and a -inf log-sum-exp.
struct MlaPrefillParams {
  const void* q = nullptr;             // [num_tokens, num_heads, nope + rope] bf16
  const void* kv = nullptr;            // [ctx_rows, num_heads, nope + v] bf16 (k_nope | v per head)
  const void* ctx = nullptr;           // [ctx_rows, ctx_dim] bf16; rope key at [rope_offset, rope_offset + rope)
  void* out = nullptr;                 // [num_tokens, num_heads, v] bf16
  float* lse = nullptr;                // [num_tokens, num_heads] ln sum_j exp(scale * score_j) (-inf: none), or null
  const int32_t* q_starts = nullptr;   // [num_seqs + 1]
  const int32_t* seq_lens = nullptr;   // [num_seqs]
  const int32_t* positions = nullptr;  // [num_tokens]
  const uint32_t* allow = nullptr;     // [num_tokens, allow_words] bit j%32 of word j/32: position j allowed; or null
  int allow_words = 0;
  int num_seqs = 0;
  int num_tokens = 0;
  int num_heads = 0;
  int max_q_len = 0;  // max new tokens of one sequence (sizes the grid)
  int nope = 128;
  int rope = 64;
  int v = 128;
  int64_t ctx_dim = 0;
  int64_t rope_offset = 0;
  int64_t ctx_rows = 0;  // rows of kv / ctx (the TMA path's map extent)
  float scale = 1.0f;
};

// True when the tensor-core kernel handles these dims (nope 128, rope 64, v 128, 16-byte aligned rope key).
bool mla_prefill_fast_supported(int nope, int rope, int v, int64_t ctx_dim, int64_t rope_offset);

// allow[t, :] = bits of the non-negative entries of topk[t, :] below allow_words * 32. Clears allow first.
cudaError_t launch_mla_topk_bitmask(const int32_t* topk, int num_tokens, int topk_k, uint32_t* allow,
                                    int allow_words, cudaStream_t stream);

// Flash-attention kernel (mma.sync bf16, fp32 softmax and accumulation); fast dims only.
cudaError_t launch_mla_prefill(const MlaPrefillParams& p, cudaStream_t stream);
// The same on Hopper's wgmma (mla_prefill_wgmma.cu: 128 query rows a block, P from registers); fast dims only.
// keys_per_tile: 64 (three stages) or 128 (two stages).
// tma: the stages filled by a producer warp's TMA boxes (the op's default; needs ctx_rows, else, or where the driver
// cannot make the tensor maps, every thread's cp.async).
cudaError_t launch_mla_prefill_wgmma(const MlaPrefillParams& p, cudaStream_t stream, int keys_per_tile = 64,
                                     bool tma = false);

// The attention over two disjoint parts of the context from each part's (out, lse) as the kernels above give them
// (a context cut into chunks, one launch each): out = (e^lse out + e^lse_part out_part) / (e^lse + e^lse_part),
// lse = ln(e^lse + e^lse_part), in place. out / out_part [rows, v] bf16, lse / lse_part [rows] f32 (rows = tokens x
// heads); a -inf part adds nothing.
cudaError_t launch_mla_merge_parts(void* out, float* lse, const void* out_part, const float* lse_part, int64_t rows,
                                   int v, cudaStream_t stream);

// Reference kernel: one block per (head, token), CUDA cores, any nope/rope/v (v <= 1024).
cudaError_t launch_mla_prefill_reference(const MlaPrefillParams& p, cudaStream_t stream);

}  // namespace ds::kernels
