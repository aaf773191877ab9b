// Token sampling as a backend op (Ops::sample): the batch description the runner builds, the result that
// comes back (B ids plus requested logprobs, never B x V logits), and the host reference of the exact
// semantics that CpuOps implements and the CUDA kernel (src/kernels/sampling.cu) mirrors.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace ds {

// Per-token adjustment of one row, applied to the raw logit x of token `id` in this order (the runner's
// penalties as SGLang/HF apply them): x -= frequency_penalty * output_count + presence_penalty when
// output_count > 0; then, when `seen` and repetition_penalty != 1, x = x > 0 ? x / rep : x * rep; then
// x += bias (the request's logit_bias); then x = -inf when `banned` (stop/EOS ids before min_new_tokens). At most
// one entry per id and row. Sampling only: returned logprobs are the raw logits'.
struct SamplePenalty {
  int32_t id = 0;
  int32_t output_count = 0;  // occurrences of id in the output so far
  uint8_t seen = 0;          // id occurs in prompt or output (repetition penalty)
  uint8_t banned = 0;
  float bias = 0.0f;         // OpenAI logit_bias
};

struct SampleRow {
  int32_t logits_row = 0;     // row of the logits tensor
  float temperature = 0.0f;   // <= 0: greedy (argmax of the adjusted logits, lowest id on ties)
  int32_t top_k = -1;         // <= 0: no limit
  float top_p = 1.0f;
  float min_p = 0.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  double uniform = 0.0;       // in [0, 1), from the request's seeded generator (unused when greedy)
  bool want_logprob = false;  // log_softmax(raw logits)[token]
  int32_t top_logprobs = 0;   // the n largest raw log-softmax values (value desc, id asc)
  int32_t ids_begin = 0;      // [begin, end) in SampleBatch::logprob_ids: raw log-softmax values of those ids too
  int32_t ids_end = 0;        // (SGLang's token_ids_logprob)
  int32_t penalty_begin = 0;  // [begin, end) in SampleBatch::penalties
  int32_t penalty_end = 0;
  int32_t store_index = -1;   // >= 0: the token is also written to token_store[store_index] on the backend
};

struct SampleBatch {
  int64_t vocab = 0;  // columns [0, vocab) of the logits are the vocabulary; any further columns are padding
  std::vector<SampleRow> rows;
  std::vector<SamplePenalty> penalties;
  std::vector<int32_t> logprob_ids;  // rows' [ids_begin, ids_end) ranges, each id in [0, vocab)
};

struct SampleResult {
  std::vector<int32_t> tokens;   // [B]
  std::vector<float> logprobs;   // [B] (NaN where not wanted)
  std::vector<std::vector<std::pair<float, int32_t>>> top;  // [B] (logprob, id), top_logprobs entries
  std::vector<float> id_logprobs;  // [logprob_ids.size()] the raw log-softmax value of each (NaN: a non-finite row)
  // First non-finite raw logit of the row (lowest id), -1 when the row is finite: the runner fails that
  // request (RELIABILITY.md). The row's token is then 0 and meaningless.
  std::vector<int32_t> bad_id;
  std::vector<float> bad_value;
};

// A sampling launched on the backend (Ops::sample_async): the device may still be running it. wait() blocks
// until its ids and logprobs are on the host (CUDA: pinned memory behind an event) and returns them; once.
class PendingSample {
 public:
  virtual ~PendingSample() = default;
  virtual SampleResult wait() = 0;
};

// The semantics of one non-greedy draw over adjusted logits x[0, V) (finite or -inf):
//   order  = ids sorted by (x desc, id asc); s_i = float(x[order_i] / temperature) (IEEE float division)
//   keep   = top_k > 0 ? min(top_k, V) : V
//   p_i    = exp(double(s_i) - double(s_0)) / sum_{j < keep} exp(double(s_j) - double(s_0))   (double)
//   top_p < 1: keep = max(1, smallest n <= keep with sum_{i < n} p_i >= top_p, else keep)
//   min_p > 0: keep = 1 + number of leading i in [1, keep) with p_i >= min_p * p_0
//   r      = uniform * sum_{i < keep} p_i; token = order of the smallest i < keep with
//            sum_{j <= i} p_j >= r, else order_{keep - 1}.
// The CPU sums sequentially; the GPU in a fixed tree order, so the two can differ only when r falls within
// double rounding of a boundary. Greedy: argmax of x, lowest id on ties.
int32_t sample_row_reference(const float* adjusted, int64_t vocab, const SampleRow& row);

// The batch's internal consistency, checked by every backend's sampling before it runs (DS_CHECK): the vocabulary
// within the logits' ld columns, each row's logits row below `rows` (-1: not known to the caller), its penalty and
// logprob-id ranges within the batch's lists, every penalty and logprob id within the vocabulary.
void check_sample_batch(const SampleBatch& batch, int64_t rows, int64_t ld);

// The whole op on host fp32 logits [rows, ld] (ld >= batch.vocab): what CpuOps::sample does.
SampleResult sample_reference(const float* logits, int64_t ld, const SampleBatch& batch);

}  // namespace ds
