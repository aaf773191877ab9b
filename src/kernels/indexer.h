// The V3.2 lightning indexer's selection: per-token scores over the paged index-key cache and the top-k
// context positions (descending score, ties to the lower position, -1 padded). A plain correct version:
// scores go through a global scratch buffer, selection is a radix select plus a bitonic sort per token.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

constexpr int kIndexerMaxTopk = 4096;

struct IndexerParams {
  const void* q;              // [tokens, heads, dim] bf16
  const void* w;              // [tokens, heads] bf16 or f32 (w_f32)
  bool w_f32;
  const void* k_cache;        // [slots, dim] bf16
  const int32_t* positions;   // [tokens]
  const int32_t* q_starts;    // [num_seqs + 1]
  const int32_t* block_table; // [num_seqs, max_pages]
  int32_t* out;               // [tokens, topk]
  float* scores;              // scratch [token_count, max_seq_len]
  int64_t token_begin, token_count;  // the tokens handled by this launch (scratch row r = token_begin + r)
  int64_t heads, dim, max_pages;
  int num_seqs, page_size, max_seq_len, topk;
  float q_scale, w_scale;
};
// score[t, s] = sum_h (w[t, h] * w_scale) * relu(q_scale * q[t, h, :] . k[slot(s), :]) for s <= positions[t].
cudaError_t launch_indexer_topk(const IndexerParams& p, cudaStream_t stream);

}  // namespace ds::kernels
