// The V3.2 lightning indexer's selection: per-token scores over the paged index-key cache and the top-k context
// positions (in ascending position order, ties to the lower position, -1 padded). Scores go through a global scratch
// buffer; the grid and the scratch rows are sized by the block table's capacity, not the batch's longest context, so
// one launch serves every context a CUDA graph replays with.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

constexpr int kIndexerMaxTopk = 4096;
// Sequences with at least this many query rows in the batch score several rows a block (sharing key tiles).
constexpr int kIndexerMultiTokenMinRows = 8;

struct IndexerParams {
  const void* q;              // [tokens, heads, dim] bf16
  const void* w;              // [tokens, heads] bf16 or f32 (w_f32)
  bool w_f32;
  const void* k_cache;        // [slots, dim] bf16
  const int32_t* positions;   // [tokens]
  const int32_t* q_starts;    // [num_seqs + 1]
  const int32_t* block_table; // [num_seqs, max_pages]
  int32_t* out;               // [tokens, topk]
  float* scores;              // scratch [token_count, score_cols]
  int64_t token_begin, token_count;  // the tokens handled by this launch (scratch row r = token_begin + r)
  int64_t heads, dim, max_pages;
  int num_seqs, page_size;
  int max_q_len;              // the longest sequence's query rows in the batch
  bool multi_token;           // allow the multi-token scoring kernel (tensor-core path, max_q_len large enough)
  bool wgmma;                 // ... on wgmma where it applies (indexer_wgmma.cu; the op's default)
  int score_cols;             // scratch row length: > every position (max_pages * page_size)
  int topk;
  int num_sms;                // sizes the scoring grid (0: one block per 64 positions)
  float q_scale, w_scale;     // q_scale >= 0 (the wgmma scores fold it into the head weights)
  bool tma;                   // the wgmma scores' key tiles from a TMA producer warp (64-position pages)
  int64_t k_slots;            // rows of k_cache (the TMA map's extent)
};
// score[t, s] = sum_h (w[t, h] * w_scale) * relu(q_scale * q[t, h, :] . k[slot(s), :]) for s <= positions[t].
// Heads <= 64 and dim in {32, 64, 128} score on the tensor cores (bf16 mma, fp32 accumulation); other shapes, or
// DSERVE_INDEXER_MMA=0 at the launcher's caller (mma = false), on CUDA cores.
cudaError_t launch_indexer_topk(const IndexerParams& p, bool mma, cudaStream_t stream);
// Its two launches: the scores into p.scores, then the selection from them into p.out.
cudaError_t launch_indexer_scores(const IndexerParams& p, bool mma, cudaStream_t stream);
cudaError_t launch_indexer_select(const IndexerParams& p, cudaStream_t stream);
bool indexer_mma_supported(int64_t heads, int64_t dim);
// The multi-token scores on wgmma (indexer_wgmma.cu): heads <= 64 of dim 128.
bool indexer_wgmma_supported(int64_t heads, int64_t dim);
cudaError_t launch_indexer_scores_wgmma(const IndexerParams& p, cudaStream_t stream);

}  // namespace ds::kernels
