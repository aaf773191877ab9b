// `dserve bench-serving`: sglang.bench_serving in C++. Builds a dataset, warms the server up, sends the
// requests with Poisson arrivals (or all at once) under a concurrency cap through one asynchronous HTTP
// client, times every streamed chunk, and prints SGLang's "Serving Benchmark Result" block.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench/dataset.h"
#include "bench/stats.h"
#include "core/status.h"

namespace ds::bench {

struct BenchServingOptions {
  std::string backend = "sglang";
  std::string base_url;            // overrides host/port
  std::string host = "127.0.0.1";
  int64_t port = 0;                // 0: the backend's default
  std::string model;               // empty: the first id of GET /v1/models
  std::string tokenizer;           // directory with tokenizer.json; empty: --model when it is such a directory
  std::string api_key;             // empty: $OPENAI_API_KEY
  DatasetOptions dataset;
  double request_rate = std::numeric_limits<double>::infinity();
  std::optional<int64_t> max_concurrency;
  int64_t warmup_requests = 1;
  bool disable_stream = false;
  bool disable_ignore_eos = false;
  bool return_logprob = false;
  bool flush_cache = false;
  bool disable_tqdm = false;
  bool output_details = false;
  uint64_t seed = 1;
  std::string output_file;         // append one JSON line when set
  std::string extra_request_body;  // JSON object merged into every request
  double timeout_s = 6 * 3600;     // per wait on the server (SGLang's client allows 6 hours)
};

struct BenchServingResult {
  BenchMetrics metrics;
  std::vector<RequestOutput> outputs;
  std::optional<double> accept_length;
  double duration_s = 0;
};

// Runs the benchmark, printing progress (stderr) and the report (stdout). Failed requests are counted,
// not fatal; errors are setup problems (bad flags, unreachable server, warmup failing entirely).
Result<BenchServingResult> run_bench_serving(const BenchServingOptions& options);

}  // namespace ds::bench
