// Tests of the DSERVE_FAULT_INJECT parser (test-only fault injection).
#include "runner/fault_inject.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(FaultInject, ParsesKindsAndSubstrings) {
  auto f = parse_fault_spec("nan_logits:poison,step_error:boom,check_error:bang");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].first, FaultKind::kNanLogits);
  EXPECT_EQ(f[0].second, "poison");
  EXPECT_EQ(f[1].first, FaultKind::kStepError);
  EXPECT_EQ(f[1].second, "boom");
  EXPECT_EQ(f[2].first, FaultKind::kCheckError);
  EXPECT_EQ(f[2].second, "bang");
}

TEST(FaultInject, SkipsUnknownKindsAndEmptySubstrings) {
  EXPECT_TRUE(parse_fault_spec("").empty());
  EXPECT_TRUE(parse_fault_spec("nan_logits:").empty());  // would poison every request
  EXPECT_TRUE(parse_fault_spec("nan_logits").empty());
  auto f = parse_fault_spec("bogus:x,,nan_logits:a:b");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].second, "a:b");
}

TEST(FaultInject, OffWithoutTheEnvironmentVariable) {
  // The test binary runs without DSERVE_FAULT_INJECT (ctest sets none).
  ASSERT_EQ(std::getenv("DSERVE_FAULT_INJECT"), nullptr);
  EXPECT_FALSE(fault_injected(FaultKind::kNanLogits, "anything"));
  EXPECT_FALSE(fault_injected(FaultKind::kStepError, ""));
}

}  // namespace
}  // namespace ds
