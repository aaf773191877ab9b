// bench-serving output: SGLang's printed "Serving Benchmark Result" block (same labels, order, widths and
// number formats as sglang.bench_serving's Python format strings) and its JSON-lines result record.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stats.h"

namespace ds::bench {

struct ReportHeader {
  std::string backend;
  double request_rate = 0;                 // +inf: all requests at once
  std::optional<int64_t> max_concurrency;  // nullopt prints "not set"
  double duration_s = 0;
};

// Python's repr() of a float ("inf", "1.0", "0.25", "1e+16"), which SGLang prints for the request rate.
std::string python_float_repr(double v);
// Python's "{:<10.2f}" / "{:<10}" and "{s:{c}^{n}}" formats.
std::string py_fixed2(double v);  // "%.2f", with Python's "nan" / "inf" spellings
std::string left_pad_line(const std::string& label, const std::string& value);  // "{:<40} {:<10}"
std::string centered(const std::string& text, char fill, int width);

// The block, one line per entry, each ending in '\n'. SGLang prints an empty line before it.
// accept_length is printed only when it is set and non-zero (SGLang: `if accept_length:`).
std::string format_report(const ReportHeader& header, const BenchMetrics& m, std::optional<double> accept_length);

// The record SGLang appends to --output-file (its field names and order), plus dserve's extras after them
// (failed, p95 E2E, p90/p95 TTFT/TPOT, max ITL).
struct ResultArgs {
  std::string backend;
  std::string dataset_name;
  double request_rate = 0;
  std::optional<int64_t> max_concurrency;
  std::optional<int64_t> sharegpt_output_len;
  int64_t random_input_len = 0;
  int64_t random_output_len = 0;
  double random_range_ratio = 0;
  nlohmann::json server_info;  // null when not fetched
  std::optional<double> accept_length;
  double duration_s = 0;
};
nlohmann::ordered_json result_json(const ResultArgs& args, const BenchMetrics& m);
// Adds SGLang's --output-details arrays (input_lens, output_lens, ttfts, itls, generated_texts, errors).
void add_result_details(nlohmann::ordered_json& j, const std::vector<RequestOutput>& outputs);
// One JSON line as Python's json.dumps writes it for these records: an infinite request rate is the
// bare token Infinity (Python accepts it back); NaN metrics become null.
std::string result_json_line(const nlohmann::ordered_json& j);

}  // namespace ds::bench
