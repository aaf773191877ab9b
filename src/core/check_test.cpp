// DS_CHECK: aborts by default; throws CheckFailure (with file:line and the message) inside ScopedCheckThrows.
#include "core/check.h"

#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace ds {
namespace {

void fail_with(int v) { DS_CHECK(v == 0, "value was ", v); }

TEST(Check, ThrowsInsideScopeWithLocationAndMessage) {
  ScopedCheckThrows scope;
  try {
    fail_with(42);
    FAIL() << "DS_CHECK did not fire";
  } catch (const CheckFailure& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("check_test.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("DS_CHECK(v == 0) failed: value was 42"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(fail_with(0));
}

TEST(Check, ScopesNestAndArePerThread) {
  ScopedCheckThrows outer;
  {
    ScopedCheckThrows inner;
    EXPECT_THROW(fail_with(1), CheckFailure);
  }
  EXPECT_THROW(fail_with(1), CheckFailure);  // still inside `outer`
  // Another thread has no scope: its failed check aborts (checked in a death test below, not here).
  bool other_throws = true;
  std::thread([&] { other_throws = detail::check_throw_depth > 0; }).join();
  EXPECT_FALSE(other_throws);
}

TEST(CheckDeathTest, AbortsOutsideAScope) {
  EXPECT_DEATH(fail_with(7), "DS_CHECK\\(v == 0\\) failed: value was 7");
}

}  // namespace
}  // namespace ds
