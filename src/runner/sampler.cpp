// Reference sampler (CPU). Filtering order as SGLang: temperature, top-k, top-p, min-p.
#include "runner/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ds {

int32_t Sampler::sample(const float* logits, int64_t vocab) {
  if (p_.temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  int64_t keep = vocab;
  if (p_.top_k > 0) keep = std::min<int64_t>(keep, p_.top_k);
  std::vector<double> prob(keep);
  const double mx = logits[order[0]] / p_.temperature;
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) sum += prob[i] = std::exp(logits[order[i]] / p_.temperature - mx);
  for (double& v : prob) v /= sum;
  if (p_.top_p < 1.0f) {
    double acc = 0;
    int64_t n = 0;
    while (n < keep && acc < p_.top_p) acc += prob[n++];
    keep = std::max<int64_t>(n, 1);
  }
  if (p_.min_p > 0.0f) {
    int64_t n = 1;
    while (n < keep && prob[n] >= p_.min_p * prob[0]) ++n;
    keep = n;
  }
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += prob[i];
  double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (int64_t i = 0; i < keep; ++i) {
    r -= prob[i];
    if (r <= 0) return order[i];
  }
  return order[keep - 1];
}

}  // namespace ds
