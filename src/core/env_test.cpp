#include "core/env.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(Env, FlagTakesOnlyZeroOrOne) {
  const char* n = "DSERVE_ENV_TEST_FLAG";
  unsetenv(n);
  EXPECT_TRUE(env_flag(n, true));
  EXPECT_FALSE(env_flag(n, false));
  setenv(n, "", 1);
  EXPECT_TRUE(env_flag(n, true));
  EXPECT_EQ(env_text(n), nullptr);
  setenv(n, "0", 1);
  EXPECT_FALSE(env_flag(n, true));
  setenv(n, "1", 1);
  EXPECT_TRUE(env_flag(n, false));
  for (const char* other : {"yes", "01", "2", "0 "}) {
    setenv(n, other, 1);
    EXPECT_TRUE(env_flag(n, true)) << other;
    EXPECT_FALSE(env_flag(n, false)) << other;
    EXPECT_STREQ(env_text(n), other);
  }
  unsetenv(n);
}

TEST(Env, IntNeedsAWholeNumber) {
  const char* n = "DSERVE_ENV_TEST_INT";
  unsetenv(n);
  EXPECT_EQ(env_int(n, 7), 7);
  setenv(n, "4096", 1);
  EXPECT_EQ(env_int(n, 7), 4096);
  setenv(n, "-3", 1);
  EXPECT_EQ(env_int(n, 7), -3);
  for (const char* bad : {"", "12abc", "abc", "99999999999999999999", " "}) {
    setenv(n, bad, 1);
    EXPECT_EQ(env_int(n, 7), 7) << "'" << bad << "'";
  }
  unsetenv(n);
}

}  // namespace
}  // namespace ds
