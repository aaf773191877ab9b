// GPU token sampling (Ops::sample on CUDA; semantics in ops/sampling.h): per row a scan over chunks of the
// row in parallel and a prepare pass (non-finite check, raw log-sum-exp, penalties, greedy argmax), a stable segmented radix sort of the rows that draw or
// report top logprobs (CUB, chunked to bound the workspace), and a walk over the sorted prefix in double.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/basic.h"  // ElemType

namespace ds::kernels {

// The per-row outputs of a sampling launch, one device block of 4-byte words laid out [4, rows] (tokens, bad_id,
// logprobs, bad_value) so the host copies them back in one piece (sample_outputs).
struct SampleOutputs {
  int32_t* tokens;   // [rows]
  int32_t* bad_id;   // [rows] first non-finite raw logit's column, -1 when the row is finite
  float* logprobs;   // [rows] (NaN where not wanted)
  float* bad_value;  // [rows]
};
inline SampleOutputs sample_outputs(int32_t* words, int64_t rows) {
  return {words, words + rows, reinterpret_cast<float*>(words + 2 * rows), reinterpret_cast<float*>(words + 3 * rows)};
}

struct SampleRowParams {
  int32_t logits_row;
  float temperature;  // <= 0: greedy
  int32_t top_k;
  float top_p, min_p;
  float frequency_penalty, presence_penalty, repetition_penalty;
  double uniform;
  int32_t penalty_begin, penalty_end;
  int32_t top_n;         // top logprobs wanted (0: none)
  int32_t want_logprob;  // 1: logprob of the token
  int32_t slot;          // row of `work` holding the adjusted logits
  int32_t raw_slot;      // row of `work` holding a copy of the raw logits (top_n > 0), else -1
  int32_t store_index;   // >= 0: tokens[b] is also written to token_store[store_index]
  int32_t ids_begin, ids_end;  // [begin, end) of SampleParams::lp_ids whose logprobs this row reports
};
struct SamplePenaltyParams {
  int32_t id, output_count;
  uint8_t seen, banned, pad0, pad1;
  float bias;  // logit_bias, added after the penalties (before `banned`)
};

// One (row, chunk) partial of the scan pass.
struct SampleScanPart {
  float mx, sum;    // chunk max, sum of exp(x - mx) (0 when the chunk holds a non-finite value)
  float best;       // first maximum of the chunk and its column
  int32_t best_id;
  int32_t bad;      // first non-finite column of the chunk, INT_MAX if none
};
constexpr int kSampleScanChunks = 32;

// Workspace and outputs, all device pointers. `work` is [num_slots, vocab] f32; slots [0, num_jobs) are
// the rows to sort (jobs), job j being slot j, in chunks of kSampleSortChunk.
struct SampleParams {
  const void* logits;
  ElemType type;  // kF32 or kBF16
  int64_t ld, vocab;
  int num_rows;
  const SampleRowParams* rows;
  const SamplePenaltyParams* penalties;
  const int32_t* job_row;   // [num_jobs] batch row of each job
  const int32_t* job_raw;   // [num_jobs] 1: raw job (top logprobs), 0: draw job
  int num_jobs;
  float* work;
  float* keys_out;          // [kSampleSortChunk, vocab]
  int32_t* vals_in;         // [kSampleSortChunk, vocab] (filled here with column ids)
  int32_t* vals_out;        // [kSampleSortChunk, vocab]
  int32_t* offsets;         // [kSampleSortChunk + 1]
  void* sort_temp;
  size_t sort_temp_bytes;
  int max_top_n;
  SampleScanPart* part;     // [num_rows, kSampleScanChunks]
  // outputs
  float* lse;               // [num_rows]
  SampleOutputs out;
  float* top_lp;            // [num_rows, max_top_n]
  int32_t* top_id;          // [num_rows, max_top_n]
  int32_t* token_store;     // rows' store_index targets (may be null when no row has one)
  const int32_t* lp_ids;    // rows' requested ids (SampleRowParams::ids_begin / ids_end), each in [0, vocab)
  float* lp_ids_out;        // [their count] raw log-softmax value of each (NaN: a non-finite row)
};

constexpr int kSampleSortChunk = 16;

// Greedy rows without penalties, logprobs or top logprobs (bench-one-batch's steps and most requests): one launch
// over sample_greedy_chunks(vocab) blocks per row (one load of each of its threads' columns in flight at once: the
// launch is a few L2 round trips, not a loop of them) that each find their chunk's first non-finite column and first
// maximum; the last block of a row to finish (a counter in `arrivals`, back to 0 when it is done) merges them into
// the outputs the general path would write (token, bad_id / bad_value, logprob NaN, the store entry). Row parameters
// travel by value, so nothing is copied to the device first. With `identity` row b reads logits row b and stores
// its token at token_store[b], for any number of rows (no per-row arrays; Ops::greedy_to_store_).
constexpr int kSampleGreedyMaxRows = 64;
constexpr int kSampleGreedyChunkCols = 1024;  // columns of one block (256 threads x 4 loads)
constexpr int kSampleGreedyMaxChunks = 256;
inline int sample_greedy_chunks(int64_t vocab) {
  const int64_t c = (vocab + kSampleGreedyChunkCols - 1) / kSampleGreedyChunkCols;
  return static_cast<int>(c < 1 ? 1 : c > kSampleGreedyMaxChunks ? kSampleGreedyMaxChunks : c);
}
struct SampleGreedyParams {
  const void* logits;
  ElemType type;  // kF32 or kBF16
  int64_t ld, vocab;
  int num_rows;  // <= kSampleGreedyMaxRows unless identity
  int identity;  // 1: logits row b, token_store[b]; the arrays below unused
  int32_t logits_row[kSampleGreedyMaxRows];
  int32_t store_index[kSampleGreedyMaxRows];  // >= 0: also written to token_store
  SampleScanPart* part;  // [num_rows, sample_greedy_chunks(vocab)]
  uint32_t* arrivals;    // [num_rows], zero before the launch (and after it)
  SampleOutputs out;  // logprobs: NaN (not wanted); null tokens: no outputs (identity only)
  int32_t* token_store;
};
cudaError_t launch_sample_greedy(const SampleGreedyParams& p, cudaStream_t stream);

// Bytes of CUB temp storage one chunk sort needs.
cudaError_t sample_sort_temp_bytes(int64_t vocab, size_t* bytes);
cudaError_t launch_sample(const SampleParams& p, cudaStream_t stream);

}  // namespace ds::kernels
