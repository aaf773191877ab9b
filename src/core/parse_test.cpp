// parse_int64 / parse_int_list: whole-string integers and comma lists, with errors that name the bad item.
#include "core/parse.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(ParseTest, Int64TakesWholeStringsOnly) {
  int64_t v = 7;
  EXPECT_TRUE(parse_int64("-42", &v));
  EXPECT_EQ(v, -42);
  EXPECT_TRUE(parse_int64("9223372036854775807", &v));
  EXPECT_EQ(v, INT64_MAX);
  v = 7;
  for (const char* bad : {"", "4x", "x4", "1.5", "9223372036854775808", " "}) {
    EXPECT_FALSE(parse_int64(bad, &v)) << "'" << bad << "'";
    EXPECT_EQ(v, 7) << "'" << bad << "' changed the output";
  }
}

TEST(ParseTest, IntListSplitsOnCommasAndTrimsSpaces) {
  Result<std::vector<int64_t>> r = parse_int_list("1, 8 ,16,-3", "--batch-size");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, (std::vector<int64_t>{1, 8, 16, -3}));
  r = parse_int_list("64", "--ms");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, std::vector<int64_t>{64});
}

TEST(ParseTest, IntListErrorsNameTheFlagAndTheItem) {
  Result<std::vector<int64_t>> r = parse_int_list("", "--ms");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "--ms is empty");
  r = parse_int_list("1,x2,3", "--batch-size");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "--batch-size: 'x2' is not an integer");
  r = parse_int_list("1,", "--tokens");  // a trailing comma is an empty item
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "--tokens: '' is not an integer");
}

}  // namespace
}  // namespace ds
