// Host reference of the sampling op (ops/sampling.h): used by CpuOps::sample and the runner's Sampler, and
// the oracle of the CUDA kernel's consistency tests.
#include "ops/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace ds {

int32_t sample_row_reference(const float* x, int64_t vocab, const SampleRow& row) {
  DS_CHECK(vocab > 0, "sampling over an empty vocabulary");
  if (row.temperature <= 0.0f) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (x[i] > x[best]) best = i;
    return static_cast<int32_t>(best);
  }
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = row.top_k > 0 ? std::min<int64_t>(row.top_k, vocab) : vocab;
  auto before = [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  if (keep < vocab) {
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  const float t = row.temperature;
  std::vector<double> prob(keep);
  const double mx = static_cast<double>(x[order[0]] / t);
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) sum += prob[i] = std::exp(static_cast<double>(x[order[i]] / t) - mx);
  for (double& v : prob) v /= sum;
  if (row.top_p < 1.0f) {
    double acc = 0;
    int64_t n = 0;
    while (n < keep && acc < row.top_p) acc += prob[n++];
    keep = std::max<int64_t>(n, 1);
  }
  if (row.min_p > 0.0f) {
    const double thr = static_cast<double>(row.min_p) * prob[0];
    int64_t n = 1;
    while (n < keep && prob[n] >= thr) ++n;
    keep = n;
  }
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += prob[i];
  const double r = row.uniform * total;
  double acc = 0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += prob[i];
    if (acc >= r) return order[i];
  }
  return order[keep - 1];
}

void check_sample_batch(const SampleBatch& batch, int64_t rows, int64_t ld) {
  const int64_t V = batch.vocab;
  DS_CHECK(V > 0 && V <= ld, "sampling vocab ", V, " outside the logits' ", ld, " columns");
  for (const SampleRow& r : batch.rows) {
    DS_CHECK(r.logits_row >= 0 && (rows < 0 || r.logits_row < rows), "sample row ", r.logits_row, " outside the logits' ",
             rows, " rows");
    DS_CHECK(r.penalty_begin >= 0 && r.penalty_begin <= r.penalty_end &&
                 r.penalty_end <= static_cast<int32_t>(batch.penalties.size()),
             "sampling penalty range");
    DS_CHECK(r.ids_begin >= 0 && r.ids_begin <= r.ids_end &&
                 r.ids_end <= static_cast<int32_t>(batch.logprob_ids.size()),
             "sampling logprob id range");
  }
  for (const SamplePenalty& p : batch.penalties) DS_CHECK(p.id >= 0 && p.id < V, "penalty token id ", p.id, " out of range");
  for (int32_t id : batch.logprob_ids) DS_CHECK(id >= 0 && id < V, "logprob token id ", id, " out of range");
}

SampleResult sample_reference(const float* logits, int64_t ld, const SampleBatch& batch) {
  const int64_t V = batch.vocab, B = static_cast<int64_t>(batch.rows.size());
  check_sample_batch(batch, -1, ld);
  SampleResult res;
  res.tokens.assign(B, 0);
  res.logprobs.assign(B, std::numeric_limits<float>::quiet_NaN());
  res.top.resize(B);
  res.bad_id.assign(B, -1);
  res.bad_value.assign(B, 0.0f);
  res.id_logprobs.assign(batch.logprob_ids.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> work(V);
  for (int64_t b = 0; b < B; ++b) {
    const SampleRow& row = batch.rows[b];
    const float* z = logits + row.logits_row * ld;
    for (int64_t i = 0; i < V; ++i)
      if (!std::isfinite(z[i])) {
        res.bad_id[b] = static_cast<int32_t>(i);
        res.bad_value[b] = z[i];
        break;
      }
    if (res.bad_id[b] >= 0) continue;
    std::copy(z, z + V, work.begin());
    for (int32_t e = row.penalty_begin; e < row.penalty_end; ++e) {
      const SamplePenalty& p = batch.penalties[e];
      float v = work[p.id];
      if (p.output_count > 0) v -= row.frequency_penalty * static_cast<float>(p.output_count) + row.presence_penalty;
      if (p.seen && row.repetition_penalty != 1.0f) v = v > 0 ? v / row.repetition_penalty : v * row.repetition_penalty;
      if (p.bias != 0.0f) v += p.bias;
      if (p.banned) v = -std::numeric_limits<float>::infinity();
      work[p.id] = v;
    }
    const int32_t tok = sample_row_reference(work.data(), V, row);
    res.tokens[b] = tok;
    if (!row.want_logprob && row.top_logprobs <= 0 && row.ids_begin == row.ids_end) continue;
    // log_softmax of the raw row, as CpuOps::log_softmax computes it.
    const float mx = *std::max_element(z, z + V);
    double sum = 0;
    for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(z[i] - mx));
    const double lse = mx + std::log(sum);
    auto lp = [&](int64_t i) { return static_cast<float>(z[i] - lse); };
    if (row.want_logprob) res.logprobs[b] = lp(tok);
    for (int32_t e = row.ids_begin; e < row.ids_end; ++e) res.id_logprobs[e] = lp(batch.logprob_ids[e]);
    if (row.top_logprobs > 0) {
      const int64_t k = std::min<int64_t>(row.top_logprobs, V);
      std::vector<int32_t> idx(V);
      std::iota(idx.begin(), idx.end(), 0);
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                        [&](int32_t a, int32_t c) { return z[a] > z[c] || (z[a] == z[c] && a < c); });
      for (int64_t i = 0; i < k; ++i) res.top[b].emplace_back(lp(idx[i]), idx[i]);
    }
  }
  return res;
}

}  // namespace ds
