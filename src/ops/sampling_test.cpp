// Tests of the sampling semantics (ops/sampling.h) on the host reference, against probabilities computed
// here by hand: filters, draws as a function of the uniform, penalties, logprobs, non-finite rows.
#include "ops/sampling.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace ds {
namespace {

SampleResult run(const std::vector<float>& logits, SampleRow row, std::vector<SamplePenalty> pens = {}) {
  SampleBatch b;
  b.vocab = static_cast<int64_t>(logits.size());
  row.penalty_begin = 0;
  row.penalty_end = static_cast<int32_t>(pens.size());
  b.rows.push_back(row);
  b.penalties = std::move(pens);
  return sample_reference(logits.data(), b.vocab, b);
}

SampleRow draw(float t, double u) {
  SampleRow r;
  r.temperature = t;
  r.uniform = u;
  return r;
}

TEST(Sampling, GreedyTakesTheLowestIdOfTheMaximum) {
  EXPECT_EQ(run({1, 5, 2, 5, -1}, draw(0.0f, 0.99)).tokens[0], 1);
  EXPECT_EQ(run({-INFINITY, -INFINITY}, draw(0.0f, 0.5)).tokens[0], 0);
}

TEST(Sampling, DrawFollowsTheCumulativeDistribution) {
  // Three tokens, temperature 1: p = softmax(logits) sorted (ids 2, 0, 1).
  const std::vector<float> x = {1.0f, 0.0f, 2.0f};
  const double z = std::exp(1.0) + 1.0 + std::exp(2.0);
  const double p2 = std::exp(2.0) / z, p0 = std::exp(1.0) / z;
  EXPECT_EQ(run(x, draw(1.0f, p2 - 1e-6)).tokens[0], 2);
  EXPECT_EQ(run(x, draw(1.0f, p2 + 1e-6)).tokens[0], 0);
  EXPECT_EQ(run(x, draw(1.0f, p2 + p0 - 1e-6)).tokens[0], 0);
  EXPECT_EQ(run(x, draw(1.0f, p2 + p0 + 1e-6)).tokens[0], 1);
  EXPECT_EQ(run(x, draw(1.0f, 0.0)).tokens[0], 2);
  // Temperature 0.5 doubles the logits.
  const double z2 = std::exp(2.0) + 1.0 + std::exp(4.0);
  EXPECT_EQ(run(x, draw(0.5f, std::exp(4.0) / z2 - 1e-6)).tokens[0], 2);
  EXPECT_EQ(run(x, draw(0.5f, std::exp(4.0) / z2 + 1e-6)).tokens[0], 0);
}

TEST(Sampling, FiltersRenormalise) {
  const std::vector<float> x = {1.0f, 0.0f, 2.0f, -1.0f};
  SampleRow r = draw(1.0f, 0.0);
  r.top_k = 2;  // ids 2, 0 renormalised: p2 = e^2 / (e^2 + e)
  const double p2 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.0));
  r.uniform = p2 - 1e-6;
  EXPECT_EQ(run(x, r).tokens[0], 2);
  r.uniform = 0.999999;
  EXPECT_EQ(run(x, r).tokens[0], 0);  // never id 1 or 3
  r = draw(1.0f, 0.999999);
  r.top_k = 1;
  EXPECT_EQ(run(x, r).tokens[0], 2);
  r = draw(1.0f, 0.999999);
  r.top_p = 0.5f;  // p2 (about 0.64) alone reaches 0.5
  EXPECT_EQ(run(x, r).tokens[0], 2);
  r = draw(1.0f, 0.999999);
  r.min_p = 0.5f;  // only tokens with p >= p_max / 2: e^1/e^2 = 0.37 < 0.5 -> only id 2
  EXPECT_EQ(run(x, r).tokens[0], 2);
  r.min_p = 0.3f;  // id 0 (0.37) stays, id 1 (0.135) goes
  EXPECT_EQ(run(x, r).tokens[0], 0);
}

TEST(Sampling, PenaltiesAdjustTheLogitsInOrder) {
  const std::vector<float> x = {3.0f, 2.5f, -1.0f, -1.2f};
  SampleRow r = draw(0.0f, 0.0);
  r.frequency_penalty = 0.2f;
  r.presence_penalty = 0.4f;
  SamplePenalty p;
  p.id = 0;
  p.output_count = 2;  // 3 - (0.4 + 0.4) = 2.2 < 2.5
  EXPECT_EQ(run(x, r, {p}).tokens[0], 1);
  p.output_count = 0;  // no output occurrence: no frequency/presence penalty
  EXPECT_EQ(run(x, r, {p}).tokens[0], 0);
  r = draw(0.0f, 0.0);
  r.repetition_penalty = 2.0f;
  p = SamplePenalty{};
  p.id = 0;
  p.seen = 1;  // 3 / 2 = 1.5 < 2.5
  EXPECT_EQ(run(x, r, {p}).tokens[0], 1);
  // Negative logits are multiplied: -1 * 2 = -2 < -1.2, so id 1 wins.
  const std::vector<float> neg = {-1.0f, -1.2f};
  p.id = 0;
  EXPECT_EQ(run(neg, r, {p}).tokens[0], 1);
  r = draw(1.0f, 0.0);
  p = SamplePenalty{};
  p.id = 0;
  p.banned = 1;
  EXPECT_EQ(run(x, r, {p}).tokens[0], 1);
  // logit_bias: added after the penalties (3 / 2 + 1.2 = 2.7 > 2.5), and a ban still wins over it.
  r = draw(0.0f, 0.0);
  r.repetition_penalty = 2.0f;
  p = SamplePenalty{};
  p.id = 0;
  p.seen = 1;
  p.bias = 1.2f;
  EXPECT_EQ(run(x, r, {p}).tokens[0], 0);
  p.bias = 0.9f;  // 2.4 < 2.5
  EXPECT_EQ(run(x, r, {p}).tokens[0], 1);
  SamplePenalty q;
  q.id = 3;
  q.bias = 100.0f;
  EXPECT_EQ(run(x, draw(0.0f, 0.0), {q}).tokens[0], 3);
  q.banned = 1;
  EXPECT_EQ(run(x, draw(0.0f, 0.0), {q}).tokens[0], 0);
}

TEST(Sampling, LogprobsAreOfTheRawRow) {
  const std::vector<float> x = {1.0f, 0.0f, 2.0f};
  SampleRow r = draw(0.0f, 0.0);
  r.want_logprob = true;
  r.top_logprobs = 2;
  r.repetition_penalty = 10.0f;  // penalties change the choice, not the reported logprobs
  SamplePenalty p;
  p.id = 2;
  p.seen = 1;
  const SampleResult s = run(x, r, {p});
  const double lse = std::log(std::exp(1.0) + 1.0 + std::exp(2.0));
  EXPECT_EQ(s.tokens[0], 0);
  EXPECT_NEAR(s.logprobs[0], 1.0 - lse, 1e-6);
  ASSERT_EQ(s.top[0].size(), 2u);
  EXPECT_EQ(s.top[0][0].second, 2);
  EXPECT_NEAR(s.top[0][0].first, 2.0 - lse, 1e-6);
  EXPECT_EQ(s.top[0][1].second, 0);
}

TEST(Sampling, NonFiniteRowsReportTheFirstBadColumn) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const SampleResult s = run({1.0f, INFINITY, nan}, draw(1.0f, 0.5));
  EXPECT_EQ(s.bad_id[0], 1);
  EXPECT_TRUE(std::isinf(s.bad_value[0]));
  EXPECT_EQ(run({1.0f, 2.0f}, draw(1.0f, 0.5)).bad_id[0], -1);
}

TEST(Sampling, PaddingColumnsAndRowsAreIgnored) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // [3 rows, ld 4]: vocab 2, row 1 is sampled; everything else is NaN.
  const std::vector<float> buf = {nan, nan, nan, nan, 0.5f, 1.5f, nan, nan, nan, nan, nan, nan};
  SampleBatch b;
  b.vocab = 2;
  SampleRow r = draw(0.0f, 0.0);
  r.logits_row = 1;
  b.rows.push_back(r);
  const SampleResult s = sample_reference(buf.data(), 4, b);
  EXPECT_EQ(s.bad_id[0], -1);
  EXPECT_EQ(s.tokens[0], 1);
}

// token_ids_logprob: each requested id's raw log-softmax value (whatever the row samples or its penalties), in the
// order asked, repeats included; NaN on a non-finite row.
TEST(Sampling, RequestedIdsGetTheirRawLogprobs) {
  SampleBatch b;
  b.vocab = 4;
  const std::vector<float> x = {1.0f, 3.0f, -2.0f, 0.5f, std::numeric_limits<float>::quiet_NaN(), 0, 0, 0};
  b.logprob_ids = {2, 0, 2, 3, 1};
  SampleRow r0;
  r0.temperature = 0.0f;
  r0.ids_begin = 0;
  r0.ids_end = 4;
  r0.penalty_begin = 0;
  r0.penalty_end = 1;
  b.penalties.push_back(SamplePenalty{2, 0, 0, 1, 0.0f});  // banned for sampling: its logprob is still the raw one
  SampleRow r1;
  r1.logits_row = 1;
  r1.ids_begin = 4;
  r1.ids_end = 5;
  b.rows = {r0, r1};
  const SampleResult s = sample_reference(x.data(), 4, b);
  double z = 0;
  for (int i = 0; i < 4; ++i) z += std::exp(static_cast<double>(x[i]));
  const double lse = std::log(z);
  ASSERT_EQ(s.id_logprobs.size(), 5u);
  EXPECT_NEAR(s.id_logprobs[0], x[2] - lse, 1e-6);
  EXPECT_NEAR(s.id_logprobs[1], x[0] - lse, 1e-6);
  EXPECT_EQ(s.id_logprobs[2], s.id_logprobs[0]);
  EXPECT_NEAR(s.id_logprobs[3], x[3] - lse, 1e-6);
  EXPECT_TRUE(std::isnan(s.id_logprobs[4]));  // row 1 is not finite
  EXPECT_EQ(s.bad_id[1], 0);
  EXPECT_EQ(s.tokens[0], 1);
}

}  // namespace
}  // namespace ds
