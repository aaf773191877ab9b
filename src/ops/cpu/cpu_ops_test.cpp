// CpuOps pieces beyond the reference math other suites cover: the overlap scheduling plumbing (sample_async
// with a token store, resolve_tokens_).
#include <algorithm>

#include <gtest/gtest.h>

#include "ops/ops.h"

namespace ds {
namespace {

// Overlap scheduling on the CPU backend: sample_async writes each stored row's token into the token store,
// and resolve_tokens_ replaces placeholder ids (-(row + 1)) by those entries, leaving real ids alone.
TEST(CpuOps, TokenStoreFeedsPlaceholders) {
  auto ops = make_cpu_ops();
  Tensor logits = Tensor::empty({2, 4}, DType::kF32);
  const float v[8] = {0.0f, 3.0f, 1.0f, 2.0f, 5.0f, 0.0f, 1.0f, 7.0f};
  std::copy(v, v + 8, logits.f32());
  Tensor store = Tensor::zeros({5}, DType::kI32);
  store.data_as<int32_t>()[0] = 42;
  SampleBatch b;
  b.vocab = 4;
  SampleRow r0, r1;  // greedy (temperature 0)
  r0.logits_row = 0;
  r0.store_index = 3;
  r1.logits_row = 1;  // not stored
  b.rows = {r0, r1};
  auto pending = ops->sample_async(logits, b, store);
  const SampleResult res = pending->wait();
  EXPECT_EQ(res.tokens[0], 1);
  EXPECT_EQ(res.tokens[1], 3);
  EXPECT_EQ(store.data_as<int32_t>()[3], 1);
  EXPECT_EQ(store.data_as<int32_t>()[1], 0);
  Tensor ids = Tensor::empty({4}, DType::kI32);
  const int32_t in[4] = {7, -4, -1, 0};
  std::copy(in, in + 4, ids.data_as<int32_t>());
  ops->resolve_tokens_(ids, store);
  EXPECT_EQ(ids.data_as<int32_t>()[0], 7);
  EXPECT_EQ(ids.data_as<int32_t>()[1], 1);   // row 3
  EXPECT_EQ(ids.data_as<int32_t>()[2], 42);  // row 0
  EXPECT_EQ(ids.data_as<int32_t>()[3], 0);
}

}  // namespace
}  // namespace ds
