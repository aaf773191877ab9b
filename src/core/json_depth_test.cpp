// JSON nesting depth by a byte scan: brackets inside strings (escaped quotes too) do not count, the limit is exact.
#include "core/json_depth.h"

#include <string>

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(JsonDepth, CountsNestingOutsideStrings) {
  EXPECT_FALSE(json_nests_deeper(R"({"a": [1, {"b": []}]})", 4));
  EXPECT_TRUE(json_nests_deeper(R"({"a": [1, {"b": []}]})", 3));
  EXPECT_FALSE(json_nests_deeper(R"({"a": "[[[[{{{{", "b": "\"[[[["})", 1));
  EXPECT_TRUE(json_nests_deeper(R"({"a": "x\\", "b": [[]]})", 2));  // an escaped backslash ends the string
  EXPECT_FALSE(json_nests_deeper("[][][][]", 1));
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  EXPECT_TRUE(json_nests_deeper(deep));
  EXPECT_FALSE(json_nests_deeper(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')));
  EXPECT_TRUE(json_nests_deeper(std::string(kMaxJsonDepth + 1, '{') + std::string(kMaxJsonDepth + 1, '}')));
}

}  // namespace
}  // namespace ds
