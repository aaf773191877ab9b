// py_json_dumps / py_float_repr against what CPython 3 prints (repr(float), json.dumps(ensure_ascii=False)).
#include "text/chat_json.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(ChatJson, FloatReprMatchesPython) {
  const std::pair<double, const char*> cases[] = {
      {0.1, "0.1"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {-0.0, "-0.0"},
      {0.0, "0.0"},
      {2.5, "2.5"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {123456789.123, "123456789.123"},
      {1.5e300, "1.5e+300"},
      {12345678901234567890.0, "1.2345678901234567e+19"},
      {100.0, "100.0"},
      {1.0 / 3.0, "0.3333333333333333"},
      {-1.25e-7, "-1.25e-07"},
      {9999999999999998.0, "9999999999999998.0"},
  };
  for (const auto& [v, want] : cases) EXPECT_EQ(py_float_repr(v), want) << want;
}

TEST(ChatJson, DumpsMatchesPython) {
  // Key order is kept (ordered_json), separators are ", " and ": ", non-ASCII stays raw, control
  // characters use \u00XX, DEL is not escaped.
  OrderedJson v = OrderedJson::parse(
      "{\"a\": [1, 2.5, true, null, \"x\\\"y\\n\\u0001\xc3\xa9\\t\\\\ \x7f\"], \"b\": {}, \"c\": []}");
  EXPECT_EQ(py_json_dumps(v), "{\"a\": [1, 2.5, true, null, \"x\\\"y\\n\\u0001\xc3\xa9\\t\\\\ \x7f\"], \"b\": {}, \"c\": []}");
  OrderedJson order = OrderedJson::parse(R"({"z": 1, "a": {"y": -2, "b": 1e-7}, "m": 18446744073709551615})");
  EXPECT_EQ(py_json_dumps(order), R"({"z": 1, "a": {"y": -2, "b": 1e-07}, "m": 18446744073709551615})");
}

TEST(ChatJson, ParseErrorNamesTheField) {
  auto r = parse_json_text("{\"a\": ", "tool arguments");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("tool arguments"), std::string::npos);
  EXPECT_TRUE(parse_json_text("[1, 2]", "x").is_ok());
}

}  // namespace
}  // namespace ds
