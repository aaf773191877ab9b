// bench-serving metrics: per-request outcomes (RequestOutput) and the aggregate numbers of SGLang's
// "Serving Benchmark Result" block (BenchMetrics), computed the way sglang.bench_serving computes them
// (numpy-style linear percentiles, TPOT excluding the first token, per-second peak buckets).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds::bench {

// What one request produced. Times are seconds; start_time is relative to the benchmark's start.
struct RequestOutput {
  bool success = false;
  std::string error;
  std::string generated_text;
  double start_time = 0;  // when the request was sent (after it got a concurrency slot)
  double latency = 0;     // send -> last byte of the response
  double ttft = 0;        // send -> first chunk that carried output (== latency without streaming)
  std::vector<double> itl;  // inter-token latencies, one per token after the first
  int64_t prompt_len = 0;   // the dataset's prompt length (what SGLang counts as input tokens)
  int64_t output_len = 0;   // server-reported completion tokens, else the requested count
  bool output_len_from_server = false;
  int64_t server_prompt_tokens = -1;  // meta_info.prompt_tokens / usage.prompt_tokens when reported
  int64_t retokenized_len = 0;        // tokens of generated_text under the client tokenizer
  std::optional<double> spec_accept_length;  // meta_info.spec_accept_length (speculative decoding)
  std::optional<int64_t> spec_verify_ct;     // meta_info.spec_verify_ct
};

struct BenchMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  int64_t total_output_retokenized = 0;
  double request_throughput = 0;
  double input_throughput = 0;
  double output_throughput = 0;
  double output_throughput_retokenized = 0;
  double total_throughput = 0;
  double total_throughput_retokenized = 0;
  double mean_ttft_ms = 0, median_ttft_ms = 0, std_ttft_ms = 0, p90_ttft_ms = 0, p95_ttft_ms = 0, p99_ttft_ms = 0;
  double mean_tpot_ms = 0, median_tpot_ms = 0, std_tpot_ms = 0, p90_tpot_ms = 0, p95_tpot_ms = 0, p99_tpot_ms = 0;
  double mean_itl_ms = 0, median_itl_ms = 0, std_itl_ms = 0, p90_itl_ms = 0, p95_itl_ms = 0, p99_itl_ms = 0,
         max_itl_ms = 0;
  double mean_e2e_latency_ms = 0, median_e2e_latency_ms = 0, std_e2e_latency_ms = 0, p90_e2e_latency_ms = 0,
         p95_e2e_latency_ms = 0, p99_e2e_latency_ms = 0;
  double concurrency = 0;  // summed request latency / wall time
  double max_output_tokens_per_s = 0;
  int64_t max_concurrent_requests = 0;
};

// numpy.percentile(values, q) with the default linear interpolation; q in [0, 100]. values non-empty.
double percentile(std::vector<double> values, double q);
double mean(const std::vector<double>& values);
double median(std::vector<double> values);
double stddev(const std::vector<double>& values);  // population (numpy's default ddof=0)

// Aggregates the outputs of a run that took `duration_s` wall seconds. Like SGLang, empty TTFT/TPOT/ITL
// lists count as [0] and an empty E2E list gives NaN (no request succeeded).
BenchMetrics compute_metrics(const std::vector<RequestOutput>& outputs, double duration_s);

// Accept length from the per-request speculative-decoding stats: total completion tokens over total
// verify steps when spec_verify_ct is reported, else the mean spec_accept_length; nullopt when none.
std::optional<double> accept_length_from_outputs(const std::vector<RequestOutput>& outputs);

}  // namespace ds::bench
