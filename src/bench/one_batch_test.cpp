// bench-one-batch's figures and result line against what sglang.bench_one_batch computes and writes.
#include "bench/one_batch.h"

#include <gtest/gtest.h>

#include "text/chat_json.h"

namespace ds::bench {
namespace {

TEST(OneBatch, FiguresAreSglangs) {
  // An even number of decode steps: numpy's median is the mean of the two middle ones (0.02 and 0.04).
  const OneBatchFigures f = one_batch_figures(0.5, {0.05, 0.02, 0.04, 0.01}, 0.7, 8, 256, 5);
  EXPECT_DOUBLE_EQ(f.prefill_throughput, 256.0 * 8 / 0.5);
  ASSERT_TRUE(f.has_decode);
  EXPECT_DOUBLE_EQ(f.median_decode_latency, 0.03);
  EXPECT_DOUBLE_EQ(f.median_decode_throughput, 8 / 0.03);
  EXPECT_DOUBLE_EQ(f.overall_throughput, (256.0 + 5) * 8 / 0.7);
  // Odd: the middle one.
  EXPECT_DOUBLE_EQ(one_batch_figures(1, {3, 1, 2}, 7, 1, 1, 4).median_decode_latency, 2);
  // One output token: prefill only, no decode figures (SGLang prints no median line then).
  EXPECT_FALSE(one_batch_figures(1, {}, 1, 1, 16, 1).has_decode);
}

TEST(OneBatch, ResultLineIsJsonDumpsOfSglangsFields) {
  const OneBatchFigures f = one_batch_figures(0.25, {0.5, 0.5}, 1.25, 2, 16, 3);
  EXPECT_EQ(one_batch_result_json("a \"run\"", f),
            "{\"run_name\": \"a \\\"run\\\"\", \"batch_size\": 2, \"input_len\": 16, \"output_len\": 3, "
            "\"prefill_latency\": 0.25, \"prefill_throughput\": 128.0, \"median_decode_latency\": 0.5, "
            "\"median_decode_throughput\": 4.0, \"total_latency\": 1.25, \"overall_throughput\": 30.4}");
  // Without decode steps the two median fields are left out, as SGLang does.
  const std::string prefill_only = one_batch_result_json("r", one_batch_figures(0.5, {}, 0.5, 1, 4, 1));
  EXPECT_EQ(prefill_only.find("median"), std::string::npos) << prefill_only;
  Result<OrderedJson> parsed = parse_json_text(prefill_only, "result line");
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ((*parsed)["overall_throughput"].get<double>(), 10.0);
}

}  // namespace
}  // namespace ds::bench
