// Per-request sampling state. The uniform u in [0, 1) is what uniform_real_distribution(0, total) scales
// (libstdc++: u * (total - 0) + 0), so drawing u here and scaling in the op keeps the seeded draws as before.
#include "runner/sampler.h"

namespace ds {

SampleRow Sampler::next_row(int32_t logits_row) {
  SampleRow r;
  r.logits_row = logits_row;
  r.temperature = p_.temperature;
  r.top_k = p_.top_k;
  r.top_p = p_.top_p;
  r.min_p = p_.min_p;
  r.frequency_penalty = p_.frequency_penalty;
  r.presence_penalty = p_.presence_penalty;
  r.repetition_penalty = p_.repetition_penalty;
  if (p_.temperature > 0.0f) r.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  return r;
}

int32_t Sampler::sample(const float* logits, int64_t vocab) {
  return sample_row_reference(logits, vocab, next_row(0));
}

void Sampler::skip(int32_t n) {
  for (int32_t i = 0; i < n; ++i) next_row(0);
}

}  // namespace ds
