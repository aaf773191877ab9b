// Tests of the bench-serving report: Python's number formats, and the block's labels, order and widths
// as SGLang's bench_serving prints them (labels listed in shared/spec/sglang-reference.md section 3).
#include "bench/report.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

TEST(BenchReport, PythonFloatRepr) {
  // Expected values are what CPython 3's repr() prints.
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(16.0), "16.0");
  EXPECT_EQ(python_float_repr(0.5), "0.5");
  EXPECT_EQ(python_float_repr(2.75), "2.75");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(100000.0), "100000.0");
  EXPECT_EQ(python_float_repr(123456789012345.0), "123456789012345.0");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
}

TEST(BenchReport, PythonFormats) {
  EXPECT_EQ(py_fixed2(3.14159), "3.14");
  EXPECT_EQ(py_fixed2(2.005), "2.00");  // binary 2.00499.. rounds down, as Python
  EXPECT_EQ(py_fixed2(std::nan("")), "nan");
  EXPECT_EQ(left_pad_line("Backend:", "sglang"), std::string("Backend:") + std::string(32, ' ') + " sglang    \n");
  EXPECT_EQ(left_pad_line("Mean TTFT (ms):", "12345678901.00"),
            std::string("Mean TTFT (ms):") + std::string(25, ' ') + " 12345678901.00\n");  // no truncation
  // Separator lines as they appear in SGLang's published output.
  EXPECT_EQ(centered(" Serving Benchmark Result ", '=', 50), "============ Serving Benchmark Result ============");
  EXPECT_EQ(centered("Time to First Token", '-', 50), "---------------Time to First Token----------------");
  EXPECT_EQ(centered("Time per Output Token (excl. 1st token)", '-', 50),
            "-----Time per Output Token (excl. 1st token)------");
  EXPECT_EQ(centered("End-to-End Latency", '-', 50), "----------------End-to-End Latency----------------");
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(BenchReport, BlockLabelsOrderAndWidths) {
  BenchMetrics m;
  m.completed = 10;
  m.total_input = 6101;
  m.total_output = 4220;
  m.total_output_retokenized = 4219;
  m.request_throughput = 0.0722;
  m.max_concurrent_requests = 2;
  m.mean_e2e_latency_ms = 13844.956;
  ReportHeader h{"sglang", std::numeric_limits<double>::infinity(), 1, 138.494};
  const auto lines = lines_of(format_report(h, m, std::nullopt));
  const std::vector<std::string> expected_labels = {
      "Backend:", "Traffic request rate:", "Max request concurrency:", "Successful requests:",
      "Benchmark duration (s):", "Total input tokens:", "Total generated tokens:",
      "Total generated tokens (retokenized):", "Request throughput (req/s):", "Input token throughput (tok/s):",
      "Output token throughput (tok/s):", "Peak output token throughput (tok/s):", "Peak concurrent requests:",
      "Total token throughput (tok/s):", "Concurrency:", "-End-to-End Latency-", "Mean E2E Latency (ms):",
      "Median E2E Latency (ms):", "P90 E2E Latency (ms):", "P99 E2E Latency (ms):", "-Time to First Token-",
      "Mean TTFT (ms):", "Median TTFT (ms):", "P99 TTFT (ms):", "-Time per Output Token (excl. 1st token)-",
      "Mean TPOT (ms):", "Median TPOT (ms):", "P99 TPOT (ms):", "-Inter-Token Latency-", "Mean ITL (ms):",
      "Median ITL (ms):", "P95 ITL (ms):", "P99 ITL (ms):", "Max ITL (ms):"};
  ASSERT_EQ(lines.size(), expected_labels.size() + 2);
  EXPECT_EQ(lines.front(), "============ Serving Benchmark Result ============");
  EXPECT_EQ(lines.back(), std::string(50, '='));
  for (size_t i = 0; i < expected_labels.size(); ++i) {
    const std::string& l = lines[i + 1];
    const std::string& label = expected_labels[i];
    if (label.front() == '-') {
      EXPECT_EQ(l.size(), 50u) << l;
      EXPECT_NE(l.find(label.substr(1, label.size() - 2)), std::string::npos) << l;
      continue;
    }
    EXPECT_EQ(l.rfind(label, 0), 0u) << "line " << i << ": " << l;
    EXPECT_EQ(l.size(), 51u) << l;  // 40 + space + value padded to 10
    EXPECT_EQ(l.find_first_not_of(' ', label.size()), 41u) << l;
  }
  // Lines as SGLang printed them for this run (published output of sglang.bench_serving).
  EXPECT_EQ(lines[1], "Backend:                                 sglang    ");
  EXPECT_EQ(lines[2], "Traffic request rate:                    inf       ");
  EXPECT_EQ(lines[3], "Max request concurrency:                 1         ");
  EXPECT_EQ(lines[4], "Successful requests:                     10        ");
  EXPECT_EQ(lines[5], "Benchmark duration (s):                  138.49    ");
  EXPECT_EQ(lines[6], "Total input tokens:                      6101      ");
  EXPECT_EQ(lines[9], "Request throughput (req/s):              0.07      ");
  EXPECT_EQ(lines[13], "Peak concurrent requests:                2         ");
  EXPECT_EQ(lines[17], "Mean E2E Latency (ms):                   13844.96  ");
}

TEST(BenchReport, OptionalLines) {
  BenchMetrics m;
  ReportHeader h{"vllm", 4.0, std::nullopt, 1.0};
  std::string s = format_report(h, m, std::nullopt);
  EXPECT_NE(s.find("Max request concurrency:                 not set   \n"), std::string::npos);
  EXPECT_NE(s.find("Traffic request rate:                    4.0       \n"), std::string::npos);
  EXPECT_EQ(s.find("Accept length:"), std::string::npos);
  EXPECT_EQ(format_report(h, m, 0.0).find("Accept length:"), std::string::npos);  // Python: `if 0.0:` is false
  s = format_report(h, m, 2.345);
  const size_t at = s.find("Accept length:                           2.35      \n");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(s.find("Concurrency:"), at);
  EXPECT_LT(at, s.find("End-to-End Latency"));
}

TEST(BenchReport, JsonRecord) {
  BenchMetrics m;
  m.completed = 3;
  m.total_output = 30;
  m.failed = 1;
  m.mean_e2e_latency_ms = std::nan("");
  ResultArgs a;
  a.backend = "sglang";
  a.dataset_name = "random-ids";
  a.request_rate = std::numeric_limits<double>::infinity();
  a.max_concurrency = 8;
  a.duration_s = 2.5;
  auto j = result_json(a, m);
  const std::string line = result_json_line(j);
  EXPECT_NE(line.find("\"request_rate\":Infinity"), std::string::npos) << line;
  EXPECT_NE(line.find("\"mean_e2e_latency_ms\":null"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // SGLang's keys, in its order, come first.
  const std::vector<std::string> keys = {"backend", "dataset_name", "request_rate", "max_concurrency",
                                         "sharegpt_output_len", "random_input_len", "random_output_len",
                                         "random_range_ratio", "server_info", "duration", "completed",
                                         "total_input_tokens", "total_output_tokens",
                                         "total_output_tokens_retokenized", "request_throughput",
                                         "input_throughput", "output_throughput", "total_throughput",
                                         "mean_e2e_latency_ms", "median_e2e_latency_ms", "std_e2e_latency_ms",
                                         "p90_e2e_latency_ms", "p99_e2e_latency_ms", "mean_ttft_ms",
                                         "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                                         "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
                                         "median_itl_ms", "std_itl_ms", "p95_itl_ms", "p99_itl_ms", "concurrency",
                                         "accept_length", "max_output_tokens_per_s", "max_concurrent_requests"};
  size_t i = 0;
  for (auto it = j.begin(); it != j.end() && i < keys.size(); ++it, ++i) EXPECT_EQ(it.key(), keys[i]);
  EXPECT_EQ(i, keys.size());
  std::string finite = line;
  finite.replace(finite.find("Infinity"), 8, "\"inf\"");
  auto back = nlohmann::json::parse(finite);
  EXPECT_EQ(back["completed"], 3);
  EXPECT_EQ(back["failed"], 1);
  EXPECT_EQ(back["max_concurrency"], 8);
  EXPECT_TRUE(back["sharegpt_output_len"].is_null());
  EXPECT_TRUE(back["accept_length"].is_null());
}

}  // namespace
}  // namespace ds::bench
