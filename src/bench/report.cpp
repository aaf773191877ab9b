// bench-serving report block and JSON record (see report.h).
#include "bench/report.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ds::bench {

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr chooses:
  // positional for exponents in [-4, 16), scientific (C-style, two-digit exponent minimum) otherwise.
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, end);
  const size_t e = sci.find('e');
  const int exp = std::atoi(sci.c_str() + e + 1);
  if (exp < -4 || exp >= 16) return sci;
  std::string mant = sci.substr(0, e);
  const bool neg = !mant.empty() && mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    const size_t int_digits = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_digits) {
      out = digits + std::string(int_digits - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  }
  return neg ? "-" + out : out;
}

std::string py_fixed2(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

static std::string pad_right(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string left_pad_line(const std::string& label, const std::string& value) {
  return pad_right(label, 40) + " " + pad_right(value, 10) + "\n";
}

std::string centered(const std::string& text, char fill, int width) {
  // Python's str.format '^': the odd padding character goes to the right.
  const int pad = width - static_cast<int>(text.size());
  if (pad <= 0) return text;
  const int left = pad / 2;
  return std::string(static_cast<size_t>(left), fill) + text + std::string(static_cast<size_t>(pad - left), fill);
}

std::string format_report(const ReportHeader& h, const BenchMetrics& m, std::optional<double> accept_length) {
  auto i = [](int64_t v) { return std::to_string(v); };
  auto f = [](double v) { return py_fixed2(v); };
  std::string s;
  s += centered(" Serving Benchmark Result ", '=', 50) + "\n";
  s += left_pad_line("Backend:", h.backend);
  s += left_pad_line("Traffic request rate:", python_float_repr(h.request_rate));
  s += left_pad_line("Max request concurrency:", h.max_concurrency ? i(*h.max_concurrency) : "not set");
  s += left_pad_line("Successful requests:", i(m.completed));
  s += left_pad_line("Benchmark duration (s):", f(h.duration_s));
  s += left_pad_line("Total input tokens:", i(m.total_input));
  s += left_pad_line("Total generated tokens:", i(m.total_output));
  s += left_pad_line("Total generated tokens (retokenized):", i(m.total_output_retokenized));
  s += left_pad_line("Request throughput (req/s):", f(m.request_throughput));
  s += left_pad_line("Input token throughput (tok/s):", f(m.input_throughput));
  s += left_pad_line("Output token throughput (tok/s):", f(m.output_throughput));
  s += left_pad_line("Peak output token throughput (tok/s):", f(m.max_output_tokens_per_s));
  s += left_pad_line("Peak concurrent requests:", i(m.max_concurrent_requests));
  s += left_pad_line("Total token throughput (tok/s):", f(m.total_throughput));
  s += left_pad_line("Concurrency:", f(m.concurrency));
  if (accept_length && *accept_length != 0) s += left_pad_line("Accept length:", f(*accept_length));
  s += centered("End-to-End Latency", '-', 50) + "\n";
  s += left_pad_line("Mean E2E Latency (ms):", f(m.mean_e2e_latency_ms));
  s += left_pad_line("Median E2E Latency (ms):", f(m.median_e2e_latency_ms));
  s += left_pad_line("P90 E2E Latency (ms):", f(m.p90_e2e_latency_ms));
  s += left_pad_line("P99 E2E Latency (ms):", f(m.p99_e2e_latency_ms));
  s += centered("Time to First Token", '-', 50) + "\n";
  s += left_pad_line("Mean TTFT (ms):", f(m.mean_ttft_ms));
  s += left_pad_line("Median TTFT (ms):", f(m.median_ttft_ms));
  s += left_pad_line("P99 TTFT (ms):", f(m.p99_ttft_ms));
  s += centered("Time per Output Token (excl. 1st token)", '-', 50) + "\n";
  s += left_pad_line("Mean TPOT (ms):", f(m.mean_tpot_ms));
  s += left_pad_line("Median TPOT (ms):", f(m.median_tpot_ms));
  s += left_pad_line("P99 TPOT (ms):", f(m.p99_tpot_ms));
  s += centered("Inter-Token Latency", '-', 50) + "\n";
  s += left_pad_line("Mean ITL (ms):", f(m.mean_itl_ms));
  s += left_pad_line("Median ITL (ms):", f(m.median_itl_ms));
  s += left_pad_line("P95 ITL (ms):", f(m.p95_itl_ms));
  s += left_pad_line("P99 ITL (ms):", f(m.p99_itl_ms));
  s += left_pad_line("Max ITL (ms):", f(m.max_itl_ms));
  s += std::string(50, '=') + "\n";
  return s;
}

namespace {

constexpr const char* kInfMarker = "__dserve_float_infinity__";
constexpr const char* kNegInfMarker = "__dserve_float_neg_infinity__";

// Infinite floats become markers that result_json_line turns into Python's bare tokens; NaN stays a
// double, which nlohmann writes as null.
nlohmann::ordered_json num(double v) {
  if (std::isinf(v)) return v > 0 ? kInfMarker : kNegInfMarker;
  return v;
}

template <class T>
nlohmann::ordered_json opt(const std::optional<T>& v) {
  if (!v) return nullptr;
  return *v;
}

}  // namespace

nlohmann::ordered_json result_json(const ResultArgs& a, const BenchMetrics& m) {
  nlohmann::ordered_json j;
  j["backend"] = a.backend;
  j["dataset_name"] = a.dataset_name;
  j["request_rate"] = num(a.request_rate);
  j["max_concurrency"] = opt(a.max_concurrency);
  j["sharegpt_output_len"] = opt(a.sharegpt_output_len);
  j["random_input_len"] = a.random_input_len;
  j["random_output_len"] = a.random_output_len;
  j["random_range_ratio"] = a.random_range_ratio;
  j["server_info"] = a.server_info;
  j["duration"] = a.duration_s;
  j["completed"] = m.completed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["total_output_tokens_retokenized"] = m.total_output_retokenized;
  j["request_throughput"] = m.request_throughput;
  j["input_throughput"] = m.input_throughput;
  j["output_throughput"] = m.output_throughput;
  j["total_throughput"] = m.total_throughput;
  j["mean_e2e_latency_ms"] = m.mean_e2e_latency_ms;
  j["median_e2e_latency_ms"] = m.median_e2e_latency_ms;
  j["std_e2e_latency_ms"] = m.std_e2e_latency_ms;
  j["p90_e2e_latency_ms"] = m.p90_e2e_latency_ms;
  j["p99_e2e_latency_ms"] = m.p99_e2e_latency_ms;
  j["mean_ttft_ms"] = m.mean_ttft_ms;
  j["median_ttft_ms"] = m.median_ttft_ms;
  j["std_ttft_ms"] = m.std_ttft_ms;
  j["p99_ttft_ms"] = m.p99_ttft_ms;
  j["mean_tpot_ms"] = m.mean_tpot_ms;
  j["median_tpot_ms"] = m.median_tpot_ms;
  j["std_tpot_ms"] = m.std_tpot_ms;
  j["p99_tpot_ms"] = m.p99_tpot_ms;
  j["mean_itl_ms"] = m.mean_itl_ms;
  j["median_itl_ms"] = m.median_itl_ms;
  j["std_itl_ms"] = m.std_itl_ms;
  j["p95_itl_ms"] = m.p95_itl_ms;
  j["p99_itl_ms"] = m.p99_itl_ms;
  j["concurrency"] = m.concurrency;
  j["accept_length"] = opt(a.accept_length);
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  // dserve extras.
  j["failed"] = m.failed;
  j["p95_e2e_latency_ms"] = m.p95_e2e_latency_ms;
  j["p90_ttft_ms"] = m.p90_ttft_ms;
  j["p95_ttft_ms"] = m.p95_ttft_ms;
  j["p90_tpot_ms"] = m.p90_tpot_ms;
  j["p95_tpot_ms"] = m.p95_tpot_ms;
  j["p90_itl_ms"] = m.p90_itl_ms;
  j["max_itl_ms"] = m.max_itl_ms;
  return j;
}

void add_result_details(nlohmann::ordered_json& j, const std::vector<RequestOutput>& outputs) {
  auto input_lens = nlohmann::ordered_json::array(), output_lens = nlohmann::ordered_json::array(),
       ttfts = nlohmann::ordered_json::array(), itls = nlohmann::ordered_json::array(),
       texts = nlohmann::ordered_json::array(), errors = nlohmann::ordered_json::array();
  for (const RequestOutput& o : outputs) {
    input_lens.push_back(o.prompt_len);
    output_lens.push_back(o.success ? o.output_len : 0);
    ttfts.push_back(o.ttft);
    itls.push_back(o.itl);
    texts.push_back(o.generated_text);
    errors.push_back(o.error);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["generated_texts"] = std::move(texts);
  j["errors"] = std::move(errors);
}

std::string result_json_line(const nlohmann::ordered_json& j) {
  // Generated texts may hold invalid UTF-8 (a stream cut mid-character): replace rather than throw.
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (auto [marker, token] : {std::pair<std::string, std::string>{std::string("\"") + kInfMarker + "\"", "Infinity"},
                               {std::string("\"") + kNegInfMarker + "\"", "-Infinity"}}) {
    for (size_t p = s.find(marker); p != std::string::npos; p = s.find(marker, p + token.size()))
      s.replace(p, marker.size(), token);
  }
  return s;
}

}  // namespace ds::bench
