// bench-serving metrics (see stats.h).
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace ds::bench {

double percentile(std::vector<double> values, double q) {
  DS_CHECK(!values.empty(), "percentile of an empty list");
  std::sort(values.begin(), values.end());
  // numpy's "linear" method: position (n - 1) * q / 100 between the two nearest order statistics.
  const double pos = (static_cast<double>(values.size()) - 1.0) * q / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  return percentile(std::move(values), 50);
}

double stddev(const std::vector<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double m = mean(values);
  double ss = 0;
  for (double v : values) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(values.size()));
}

namespace {

struct Summary {
  double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};

// Milliseconds summary; SGLang writes `np.mean(xs or 0)`, so an empty list summarises as all zeros,
// except E2E latency which it never defaults (NaN when nothing succeeded).
Summary summarize_ms(std::vector<double> xs, bool empty_is_nan) {
  Summary s;
  if (xs.empty()) {
    if (!empty_is_nan) return s;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return Summary{nan, nan, nan, nan, nan, nan, nan};
  }
  for (double& x : xs) x *= 1000.0;
  std::sort(xs.begin(), xs.end());
  s.mean = mean(xs);
  s.median = percentile(xs, 50);
  s.std = stddev(xs);
  s.p90 = percentile(xs, 90);
  s.p95 = percentile(xs, 95);
  s.p99 = percentile(xs, 99);
  s.max = xs.back();
  return s;
}

}  // namespace

BenchMetrics compute_metrics(const std::vector<RequestOutput>& outputs, double duration_s) {
  BenchMetrics m;
  std::vector<double> ttfts, tpots, itls, e2es;
  for (const RequestOutput& o : outputs) {
    if (!o.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input += o.prompt_len;
    m.total_output += o.output_len;
    m.total_output_retokenized += o.retokenized_len;
    if (o.output_len > 1) tpots.push_back((o.latency - o.ttft) / static_cast<double>(o.output_len - 1));
    itls.insert(itls.end(), o.itl.begin(), o.itl.end());
    ttfts.push_back(o.ttft);
    e2es.push_back(o.latency);
  }
  const double d = duration_s;
  m.request_throughput = static_cast<double>(m.completed) / d;
  m.input_throughput = static_cast<double>(m.total_input) / d;
  m.output_throughput = static_cast<double>(m.total_output) / d;
  m.output_throughput_retokenized = static_cast<double>(m.total_output_retokenized) / d;
  m.total_throughput = static_cast<double>(m.total_input + m.total_output) / d;
  m.total_throughput_retokenized = static_cast<double>(m.total_input + m.total_output_retokenized) / d;

  const Summary ttft = summarize_ms(ttfts, false), tpot = summarize_ms(tpots, false),
                itl = summarize_ms(itls, false), e2e = summarize_ms(e2es, true);
  m.mean_ttft_ms = ttft.mean, m.median_ttft_ms = ttft.median, m.std_ttft_ms = ttft.std;
  m.p90_ttft_ms = ttft.p90, m.p95_ttft_ms = ttft.p95, m.p99_ttft_ms = ttft.p99;
  m.mean_tpot_ms = tpot.mean, m.median_tpot_ms = tpot.median, m.std_tpot_ms = tpot.std;
  m.p90_tpot_ms = tpot.p90, m.p95_tpot_ms = tpot.p95, m.p99_tpot_ms = tpot.p99;
  m.mean_itl_ms = itl.mean, m.median_itl_ms = itl.median, m.std_itl_ms = itl.std;
  m.p90_itl_ms = itl.p90, m.p95_itl_ms = itl.p95, m.p99_itl_ms = itl.p99, m.max_itl_ms = itl.max;
  m.mean_e2e_latency_ms = e2e.mean, m.median_e2e_latency_ms = e2e.median, m.std_e2e_latency_ms = e2e.std;
  m.p90_e2e_latency_ms = e2e.p90, m.p95_e2e_latency_ms = e2e.p95, m.p99_e2e_latency_ms = e2e.p99;
  m.concurrency = std::accumulate(e2es.begin(), e2es.end(), 0.0) / d;

  // Peaks over one-second buckets from the first request's start: output tokens whose arrival time
  // (start + ttft + cumulative ITLs) falls in the bucket, and requests alive during any part of it.
  if (m.completed > 0) {
    double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
    for (const RequestOutput& o : outputs) {
      if (!o.success) continue;
      t0 = std::min(t0, o.start_time);
      t1 = std::max(t1, o.start_time + o.latency);
    }
    const int64_t buckets = static_cast<int64_t>(std::ceil(t1 - t0)) + 1;
    std::vector<double> tokens(static_cast<size_t>(buckets), 0.0);
    std::vector<int64_t> alive(static_cast<size_t>(buckets), 0);
    for (const RequestOutput& o : outputs) {
      if (!o.success) continue;
      double t = o.start_time + o.ttft;
      auto add_token = [&](double when) {
        const int64_t b = static_cast<int64_t>(when - t0);  // truncation, as Python's int()
        if (b >= 0 && b < buckets) tokens[static_cast<size_t>(b)] += 1;
      };
      add_token(t);
      for (double gap : o.itl) {
        t += gap;
        add_token(t);
      }
      const int64_t first = static_cast<int64_t>(o.start_time - t0);
      const int64_t last = static_cast<int64_t>(o.start_time + o.latency - t0);
      for (int64_t b = first; b < std::min(last + 1, buckets); ++b) alive[static_cast<size_t>(b)] += 1;
    }
    m.max_output_tokens_per_s = *std::max_element(tokens.begin(), tokens.end());
    m.max_concurrent_requests = *std::max_element(alive.begin(), alive.end());
  }
  return m;
}

std::optional<double> accept_length_from_outputs(const std::vector<RequestOutput>& outputs) {
  int64_t tokens = 0, verify = 0;
  double sum = 0;
  int64_t n = 0;
  for (const RequestOutput& o : outputs) {
    if (!o.success) continue;
    if (o.spec_verify_ct && *o.spec_verify_ct > 0) {
      tokens += o.output_len;
      verify += *o.spec_verify_ct;
    }
    if (o.spec_accept_length) {
      sum += *o.spec_accept_length;
      ++n;
    }
  }
  if (verify > 0) return static_cast<double>(tokens) / static_cast<double>(verify);
  if (n > 0) return sum / static_cast<double>(n);
  return std::nullopt;
}

}  // namespace ds::bench
