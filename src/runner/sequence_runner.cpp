// Single-sequence scoring and generation over the paged latent cache.
#include "runner/sequence_runner.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "runner/attn_metadata.h"
#include "runner/cuda_graph_runner.h"

namespace ds {
namespace {

std::vector<std::pair<float, int32_t>> top_of(const float* lp, int64_t vocab, int k) {
  std::vector<int32_t> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0);
  k = static_cast<int>(std::min<int64_t>(k, vocab));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return lp[a] > lp[b] || (lp[a] == lp[b] && a < b);
  });
  std::vector<std::pair<float, int32_t>> out;
  for (int i = 0; i < k; ++i) out.emplace_back(lp[idx[i]], idx[i]);
  return out;
}

}  // namespace

SequenceRunner::SequenceRunner(DeepseekModel& model, Ops& ops, int page_size, KvCacheDtype kv_dtype)
    : model_(model), ops_(ops), page_size_(page_size), kv_dtype_(kv_dtype) {}

void SequenceRunner::reset(int64_t max_tokens) {
  const int pages = static_cast<int>((max_tokens + page_size_ - 1) / page_size_) + 1;
  if (cache_.num_pages < pages) cache_ = make_kv_cache(ops_, model_.config(), page_size_, pages, model_.num_mtp_layers(), kv_dtype_);
  // Hand out pages in reverse order so the page table is not the identity (catches slot-mapping bugs).
  pages_.resize(pages);
  for (int i = 0; i < pages; ++i) pages_[i] = pages - 1 - i;
}

Tensor SequenceRunner::step(const std::vector<int32_t>& ids, int64_t start, AttnMode mode) {
  SeqSlice s{start, static_cast<int64_t>(ids.size()), &pages_};
  AttnMetadata meta = build_attn_metadata({s}, page_size_, ops_);
  Tensor host_ids = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::kI32);
  std::copy(ids.begin(), ids.end(), host_ids.data_as<int32_t>());
  return model_.forward(ops_.upload(host_ids), meta, cache_, mode);
}

Tensor SequenceRunner::hidden_states(const std::vector<int32_t>& ids, AttnMode mode) {
  DS_CHECK(!ids.empty());
  reset(static_cast<int64_t>(ids.size()));
  return to_f32(ops_.to_host(step(ids, 0, mode)));  // [n, d]
}

Tensor SequenceRunner::routed_experts(const std::vector<int32_t>& ids) {
  DS_CHECK(!ids.empty());
  model_.enable_routed_capture(static_cast<int64_t>(ids.size()));
  reset(static_cast<int64_t>(ids.size()));
  (void)step(ids, 0, AttnMode::kAuto);
  return ops_.to_host(model_.routed_ids(static_cast<int64_t>(ids.size())));  // [n, layers * top_k]
}

namespace {
constexpr int64_t kScoreLogitRows = 1024;
}  // namespace

ScoreResult SequenceRunner::score(const std::vector<int32_t>& ids, int top_k, AttnMode mode, int chunk) {
  DS_CHECK(!ids.empty());
  reset(static_cast<int64_t>(ids.size()));
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t step_len = chunk > 0 ? chunk : n;
  ScoreResult r;
  r.token_logprobs.assign(n, 0.0f);
  r.top_logprobs.resize(n);
  for (int64_t begin = 0; begin < n; begin += step_len) {
    const int64_t end = std::min(n, begin + step_len);
    std::vector<int32_t> part(ids.begin() + begin, ids.begin() + end);
    Tensor hidden = step(part, begin, mode);  // [end - begin, d]
    // The logits and their log-softmax a block of rows at a time (0.5 GB each at V3's vocabulary): a whole
    // 32K-token step's would be 2 x 17 GB of fp32.
    for (int64_t b0 = begin; b0 < end; b0 += kScoreLogitRows) {
      const int64_t b1 = std::min(end, b0 + kScoreLogitRows);
      Tensor lp = ops_.to_host(ops_.log_softmax(model_.logits(hidden.rows(b0 - begin, b1 - begin))));  // [b1 - b0, V]
      const int64_t vocab = lp.dim(1);
      for (int64_t i = b0; i < b1; ++i) {
        const float* row = lp.f32() + (i - b0) * vocab;  // distribution of token i + 1
        if (i + 1 < n) {
          r.token_logprobs[i + 1] = row[ids[i + 1]];
          if (top_k > 0) r.top_logprobs[i + 1] = top_of(row, vocab, top_k);
        } else {
          r.next_top = top_of(row, vocab, std::max(top_k, 1));
        }
      }
    }
  }
  return r;
}

GenerateResult SequenceRunner::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                        AttnMode decode_mode) {
  DS_CHECK(!prompt.empty());
  reset(static_cast<int64_t>(prompt.size()) + opts.max_new_tokens);
  std::vector<int64_t> stops(opts.sampling.stop_token_ids.begin(), opts.sampling.stop_token_ids.end());
  if (!opts.sampling.ignore_eos)
    stops.insert(stops.end(), model_.config().eos_token_ids.begin(), model_.config().eos_token_ids.end());
  Sampler sampler(opts.sampling);
  GenerateResult r;
  r.finish_reason = "length";
  const int64_t max_tokens = static_cast<int64_t>(prompt.size()) + opts.max_new_tokens;
  const int32_t used_pages = static_cast<int32_t>((max_tokens + page_size_ - 1) / page_size_);
  std::unique_ptr<CudaGraphRunner> graphs;
  if (use_cuda_graphs_ && ops_.device() == Device::kCuda && decode_mode != AttnMode::kMha && opts.max_new_tokens > 1) {
    // reset() keeps one page beyond the sequence's (the last of pages_): the padding-free bs-1 graph's dummy.
    CudaGraphOptions go;
    go.max_bs = 1;
    go.max_context = max_tokens;
    go.dummy_page = pages_.back();
    go.verbose = false;
    auto g = CudaGraphRunner::create(model_, ops_, cache_, go);
    if (g && (*g)->capture().is_ok()) graphs = std::move(*g);
  }
  Tensor hidden = step(prompt, 0, AttnMode::kAuto);
  Tensor graph_logits;  // [1, vocab] from the last graph replay
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < opts.max_new_tokens; ++i) {
    Tensor dev_logits = graph_logits.defined() ? graph_logits  // [1, vocab] on the backend
                                               : model_.logits(ops_.select_rows(hidden, {hidden.dim(0) - 1}));
    // Sampled by the backend (Ops::sample): only the token and its logprob come back from the GPU.
    SampleBatch batch;
    batch.vocab = dev_logits.dim(1);
    batch.rows.push_back(sampler.next_row(0));
    batch.rows[0].want_logprob = true;
    const SampleResult s = ops_.sample(dev_logits, batch);
    if (s.bad_id[0] >= 0) {
      r.finish_reason = "non-finite logits";
      break;
    }
    const int32_t tok = s.tokens[0];
    r.output_ids.push_back(tok);
    r.output_logprobs.push_back(s.logprobs[0]);
    if (std::find(stops.begin(), stops.end(), tok) != stops.end()) {
      r.finish_reason = "stop";
      break;
    }
    if (i + 1 == opts.max_new_tokens) break;
    if (graphs) {
      const int32_t p = static_cast<int32_t>(pos++);
      graph_logits = graphs->replay({DecodeSeq{tok, p, pages_[p / page_size_] * page_size_ + p % page_size_,
                                               pages_.data(), used_pages}});
    } else {
      hidden = step({tok}, pos++, decode_mode);
    }
  }
  return r;
}

}  // namespace ds
