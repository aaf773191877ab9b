// bench-one-batch's figures of one run (batch x input length x output length) and its result line, computed and
// written as sglang.bench_one_batch does (numpy's median of the decode steps; a json.dumps line a run).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ds::bench {

struct OneBatchFigures {
  int64_t batch_size = 0, input_len = 0, output_len = 0;
  double prefill_latency = 0, prefill_throughput = 0;  // s; batch x input_len / latency
  bool has_decode = false;                             // output_len > 1: the median fields below are set
  double median_decode_latency = 0, median_decode_throughput = 0;  // s; batch / median
  double total_latency = 0, overall_throughput = 0;    // s; (input_len + output_len) x batch / total
};

// The figures of a run whose prefill took `prefill_latency` s, whose decode steps took `decode_latencies` s each
// (output_len - 1 of them) and which took `total` s in all.
OneBatchFigures one_batch_figures(double prefill_latency, const std::vector<double>& decode_latencies, double total,
                                  int64_t batch_size, int64_t input_len, int64_t output_len);

// {"run_name": ..., "batch_size": ..., "input_len": ..., "output_len": ..., "prefill_latency": ...,
// "prefill_throughput": ..., ["median_decode_latency": ..., "median_decode_throughput": ...,] "total_latency": ...,
// "overall_throughput": ...}: sglang.bench_one_batch's line for --result-filename, without the newline.
std::string one_batch_result_json(const std::string& run_name, const OneBatchFigures& f);

}  // namespace ds::bench
