// Host-side token sampling from one row of logits: greedy (temperature 0), or temperature with top-k /
// top-p / min-p filtering and a per-request seeded generator.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "sched/request.h"  // SamplingParams

namespace ds {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  // Returns the chosen token id given fp32 logits [vocab].
  int32_t sample(const float* logits, int64_t vocab);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
};

}  // namespace ds
