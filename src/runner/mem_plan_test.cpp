// Tests of the KV pool planning arithmetic (mem_plan.h) with hand-computed budgets.
#include "runner/mem_plan.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

MemPlanInput h100() {
  MemPlanInput in;
  in.total_bytes = 80 * kGiB;
  in.weights_bytes = 30 * kGiB;
  in.free_bytes = 49 * kGiB;  // 30 GiB weights + 1 GiB context and workspaces
  in.kv_bytes_per_token = 27 * 576 * 2;  // V2-Lite: 27 layers x 576 bf16
  in.page_size = 64;
  in.chunked_prefill_size = 8192;
  in.cuda_graph_max_bs = 256;
  in.max_running_requests = 256;
  in.vocab = 102400;
  in.min_tokens = 4096;
  return in;
}

TEST(MemPlan, ReserveFollowsTheDocumentedEstimate) {
  MemPlanInput in = h100();
  const int64_t expect = 512 * kMiB + 8192 * 3 * kMiB / 2 + 256 * 2 * kMiB + 2 * 256 * 102400 * 4 + 16 * 102400 * 12;
  EXPECT_EQ(activation_reserve_bytes(in), expect);
  in.chunked_prefill_size = 512;  // SGLang counts at least 2048 tokens
  EXPECT_EQ(activation_reserve_bytes(in) - (512 * kMiB + 256 * 2 * kMiB + 2 * 256 * 102400 * 4 + 16 * 102400 * 12),
            2048 * 3 * kMiB / 2);
  // Without chunking a step's prompt tokens are --max-prefill-tokens: the reserve counts those.
  in.chunked_prefill_size = -1;
  in.max_prefill_tokens = 16384;
  EXPECT_EQ(activation_reserve_bytes(in) - (512 * kMiB + 256 * 2 * kMiB + 2 * 256 * 102400 * 4 + 16 * 102400 * 12),
            16384 * 3 * kMiB / 2);
  in.max_prefill_tokens = 100;  // at least 2048 tokens, as with chunks
  EXPECT_EQ(activation_reserve_bytes(in) - (512 * kMiB + 256 * 2 * kMiB + 2 * 256 * 102400 * 4 + 16 * 102400 * 12),
            2048 * 3 * kMiB / 2);
}

TEST(MemPlan, FractionBoundsThePool) {
  MemPlanInput in = h100();
  in.mem_fraction_static = 0.8;  // 64 GiB static: 31 GiB used -> 33 GiB of pool
  auto p = plan_kv_memory(in);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const int64_t page = in.kv_bytes_per_token * 64;
  EXPECT_EQ(p->num_pages, (33 * kGiB) / page);
  EXPECT_EQ(p->max_total_tokens, int64_t{p->num_pages} * 64);
  EXPECT_EQ(p->kv_bytes, int64_t{p->num_pages} * page);
  EXPECT_LE(p->kv_bytes, 33 * kGiB);
  EXPECT_GT(p->kv_bytes, 33 * kGiB - page);
  // A larger fraction gives a larger pool.
  in.mem_fraction_static = 0.85;
  auto q = plan_kv_memory(in);
  ASSERT_TRUE(q.is_ok());
  EXPECT_GT(q->num_pages, p->num_pages);
}

TEST(MemPlan, TheReserveStaysFreeEvenWithAHighFraction) {
  MemPlanInput in = h100();
  in.mem_fraction_static = 0.99 - 1e-9;  // would leave less than the reserve
  auto p = plan_kv_memory(in);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_LE(p->kv_bytes, in.free_bytes - activation_reserve_bytes(in));
  EXPECT_GT(p->kv_bytes, in.free_bytes - activation_reserve_bytes(in) - in.kv_bytes_per_token * 64);
}

TEST(MemPlan, DefaultFractionKeepsTenGiBOnLargeGpus) {
  MemPlanInput in = h100();
  in.chunked_prefill_size = 2048;  // reserve estimate ~4.2 GiB, below the 10 GiB floor
  auto p = plan_kv_memory(in);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_NEAR(p->fraction, 70.0 / 80.0, 1e-12);  // the 10 GiB floor exceeds the estimate here
  EXPECT_LE(p->kv_bytes, 70 * kGiB - 31 * kGiB);
}

TEST(MemPlan, NotFittingNamesTheMissingGiB) {
  MemPlanInput in = h100();
  in.mem_fraction_static = 0.4;  // 32 GiB static, 31 GiB used: 1 GiB left
  in.min_tokens = 3 * kGiB / in.kv_bytes_per_token;  // needs ~3 GiB
  auto p = plan_kv_memory(in);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("GiB missing"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("2.0"), std::string::npos) << p.status().message();  // ~2.00 GiB
  EXPECT_NE(p.status().message().find("--mem-fraction-static"), std::string::npos);
  // Weights larger than the whole static budget also fail.
  in.min_tokens = 64;
  in.mem_fraction_static = 0.3;
  EXPECT_FALSE(plan_kv_memory(in).is_ok());
}

// A running limit past memory is bounded by the rows a quarter of the free memory holds (V2-Lite's vocab: 819,200
// bytes a row), so the plan reserves what a batch can use and the pool still fits; small limits are kept.
TEST(MemPlan, HugeRunningLimitsReserveWhatMemoryHolds) {
  MemPlanInput in = h100();
  EXPECT_EQ(reserved_running_rows(256, in.free_bytes, in.vocab), 256);
  const int64_t rows = in.free_bytes / 4 / (2 * in.vocab * 4);  // 16,056 at 49 GiB free
  EXPECT_EQ(reserved_running_rows(1000000000, in.free_bytes, in.vocab), rows);
  EXPECT_EQ(reserved_running_rows(1000000000, 0, in.vocab), 1);
  EXPECT_EQ(reserved_running_rows(0, in.free_bytes, in.vocab), 1);
  in.max_running_requests = 1000000000;
  EXPECT_FALSE(plan_kv_memory(in).is_ok()) << "the raw limit's reserve (~745 TiB) cannot fit";
  in.max_running_requests = reserved_running_rows(1000000000, in.free_bytes, in.vocab);
  auto p = plan_kv_memory(in);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_GT(p->num_pages, 0);
}

// Speculative decoding samples steps + 1 rows a request (verify graphs of as many rows a sequence): the logits,
// sampling and graph terms scale with them, and the rows a reserve holds are fewer.
TEST(MemPlan, SpeculativeRowsScaleTheLogitsReserve) {
  MemPlanInput in = h100();
  in.rows_per_request = 4;
  const int64_t expect =
      512 * kMiB + 8192 * 3 * kMiB / 2 + 256 * 4 * 2 * kMiB + 2 * 256 * 4 * 102400 * 4 + 16 * 102400 * 12;
  EXPECT_EQ(activation_reserve_bytes(in), expect);
  const int64_t rows = in.free_bytes / 4 / (2 * in.vocab * 4);
  EXPECT_EQ(reserved_running_rows(1000000000, in.free_bytes, in.vocab, 4), rows / 4);
  EXPECT_EQ(reserved_running_rows(48, in.free_bytes, in.vocab, 4), 48);
}

TEST(MemPlan, RejectsBadInputs) {
  MemPlanInput in = h100();
  in.mem_fraction_static = 1.5;
  EXPECT_FALSE(plan_kv_memory(in).is_ok());
  in = h100();
  in.free_bytes = in.total_bytes + 1;
  EXPECT_FALSE(plan_kv_memory(in).is_ok());
  in = h100();
  in.kv_bytes_per_token = 0;
  EXPECT_FALSE(plan_kv_memory(in).is_ok());
}

TEST(MemPlan, DescribeHasSGLangsKvLine) {
  MemPlanInput in = h100();
  in.mem_fraction_static = 0.8;
  auto p = plan_kv_memory(in);
  ASSERT_TRUE(p.is_ok());
  const std::string s = describe_mem_plan(in, *p);
  EXPECT_NE(s.find("KV Cache is allocated. #tokens: " + std::to_string(p->max_total_tokens)), std::string::npos) << s;
  EXPECT_NE(s.find("weights 30.00 GiB"), std::string::npos) << s;
}

}  // namespace
}  // namespace ds
