// bench-one-batch's figures and result line (see one_batch.h).
#include "bench/one_batch.h"

#include "bench/stats.h"
#include "text/chat_json.h"

namespace ds::bench {

OneBatchFigures one_batch_figures(double prefill_latency, const std::vector<double>& decode_latencies, double total,
                                  int64_t batch_size, int64_t input_len, int64_t output_len) {
  OneBatchFigures f;
  f.batch_size = batch_size;
  f.input_len = input_len;
  f.output_len = output_len;
  f.prefill_latency = prefill_latency;
  f.prefill_throughput = static_cast<double>(input_len * batch_size) / prefill_latency;
  f.has_decode = output_len > 1 && !decode_latencies.empty();
  if (f.has_decode) {
    f.median_decode_latency = median(decode_latencies);
    f.median_decode_throughput = static_cast<double>(batch_size) / f.median_decode_latency;
  }
  f.total_latency = total;
  f.overall_throughput = static_cast<double>((input_len + output_len) * batch_size) / total;
  return f;
}

std::string one_batch_result_json(const std::string& run_name, const OneBatchFigures& f) {
  OrderedJson j;
  j["run_name"] = run_name;
  j["batch_size"] = f.batch_size;
  j["input_len"] = f.input_len;
  j["output_len"] = f.output_len;
  j["prefill_latency"] = f.prefill_latency;
  j["prefill_throughput"] = f.prefill_throughput;
  if (f.has_decode) {
    j["median_decode_latency"] = f.median_decode_latency;
    j["median_decode_throughput"] = f.median_decode_throughput;
  }
  j["total_latency"] = f.total_latency;
  j["overall_throughput"] = f.overall_throughput;
  return py_json_dumps(j);
}

}  // namespace ds::bench
