// Host-side sampling state of one request: the seeded generator that draws each step's uniform (the
// sampling op, ops/sampling.h, turns it into a token on either backend), plus a one-row host sampler.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "ops/sampling.h"
#include "sched/request.h"  // SamplingParams

namespace ds {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  // The op row for this request's next token (penalty range left empty); draws the next uniform from the
  // generator unless greedy, so a request's draws do not depend on the backend or the batch.
  SampleRow next_row(int32_t logits_row);
  // Returns the chosen token id given adjusted fp32 logits [vocab] (the reference semantics on the host).
  int32_t sample(const float* logits, int64_t vocab);
  // Draws (and drops) the uniforms of n rows: a speculative step rewinds to its start and skips the rows it used.
  void skip(int32_t n);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
};

}  // namespace ds
