// Tests of the bench-serving metric math against hand-computed values (numpy's percentile definition,
// SGLang's TPOT/concurrency/peak formulas).
#include "bench/stats.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

TEST(BenchStats, PercentileIsNumpyLinear) {
  // numpy.percentile([1,2,3,4], q): position 3*q/100 between order statistics.
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 6}), 3);
  EXPECT_DOUBLE_EQ(stddev({1, 3}), 1);  // population standard deviation
}

RequestOutput ok(double start, double ttft, double latency, int64_t in, int64_t out, std::vector<double> itl) {
  RequestOutput o;
  o.success = true;
  o.start_time = start;
  o.ttft = ttft;
  o.latency = latency;
  o.prompt_len = in;
  o.output_len = out;
  o.retokenized_len = out + 1;
  o.itl = std::move(itl);
  return o;
}

TEST(BenchStats, ComputeMetricsFollowsSglangFormulas) {
  std::vector<RequestOutput> outs;
  outs.push_back(ok(0.0, 0.5, 2.0, 100, 4, {0.5, 0.5, 0.5}));
  outs.push_back(ok(0.2, 0.3, 1.3, 50, 3, {0.5, 0.5}));
  RequestOutput bad;
  bad.success = false;
  bad.prompt_len = 999;
  bad.output_len = 999;
  outs.push_back(bad);
  const BenchMetrics m = compute_metrics(outs, 4.0);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 150);  // failed requests count nothing
  EXPECT_EQ(m.total_output, 7);
  EXPECT_EQ(m.total_output_retokenized, 9);
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.5);
  EXPECT_DOUBLE_EQ(m.input_throughput, 37.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 1.75);
  EXPECT_DOUBLE_EQ(m.total_throughput, 39.25);
  // TPOT = (latency - ttft) / (output - 1): 1.5/3 = 0.5 s and 1.0/2 = 0.5 s.
  EXPECT_NEAR(m.mean_tpot_ms, 500, 1e-9);
  EXPECT_NEAR(m.mean_ttft_ms, 400, 1e-9);
  EXPECT_NEAR(m.median_ttft_ms, 400, 1e-9);
  EXPECT_NEAR(m.p99_ttft_ms, 300 + 200 * 0.99, 1e-9);
  EXPECT_NEAR(m.mean_e2e_latency_ms, 1650, 1e-9);
  EXPECT_NEAR(m.p90_e2e_latency_ms, 1300 + 700 * 0.9, 1e-9);
  EXPECT_NEAR(m.mean_itl_ms, 500, 1e-9);
  EXPECT_NEAR(m.max_itl_ms, 500, 1e-9);
  EXPECT_NEAR(m.concurrency, 3.3 / 4.0, 1e-12);
  // Token times: request 1 at 0.5, 1.0, 1.5, 2.0; request 2 at 0.5, 1.0, 1.5 (from t0 = 0).
  // Buckets [0,1): 2 tokens, [1,2): 4, [2,3): 1. Both requests are alive in buckets 0 and 1.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 4);
  EXPECT_EQ(m.max_concurrent_requests, 2);
}

TEST(BenchStats, EmptyListsAsSglang) {
  RequestOutput o = ok(0, 0, 1.0, 10, 1, {});  // one output token: no TPOT, no ITL
  BenchMetrics m = compute_metrics({o}, 1.0);
  EXPECT_EQ(m.mean_tpot_ms, 0);
  EXPECT_EQ(m.p99_itl_ms, 0);
  EXPECT_EQ(m.max_itl_ms, 0);
  RequestOutput bad;
  m = compute_metrics({bad}, 1.0);
  EXPECT_EQ(m.completed, 0);
  EXPECT_TRUE(std::isnan(m.mean_e2e_latency_ms));  // np.mean([]) in SGLang
  EXPECT_EQ(m.mean_ttft_ms, 0);
  EXPECT_EQ(m.max_concurrent_requests, 0);
}

TEST(BenchStats, AcceptLength) {
  RequestOutput a = ok(0, 0.1, 1, 1, 30, {});
  RequestOutput b = ok(0, 0.1, 1, 1, 10, {});
  EXPECT_FALSE(accept_length_from_outputs({a, b}).has_value());
  a.spec_verify_ct = 10;
  b.spec_verify_ct = 10;
  EXPECT_DOUBLE_EQ(*accept_length_from_outputs({a, b}), 2.0);  // 40 tokens over 20 verify steps
  RequestOutput c = ok(0, 0.1, 1, 1, 10, {});
  c.spec_accept_length = 3.0;
  RequestOutput d = c;
  d.spec_accept_length = 2.0;
  EXPECT_DOUBLE_EQ(*accept_length_from_outputs({c, d}), 2.5);
}

}  // namespace
}  // namespace ds::bench
