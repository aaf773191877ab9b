// JSON schemas through their regex and ByteDfa: texts the schema admits match, texts it does not (a missing
// required property, a wrong type, an extra property, out-of-bounds counts) do not; unsupported schemas are named.
#include "text/json_schema_regex.h"

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "text/regex_dfa.h"

namespace ds {
namespace {

ByteDfa dfa_of(const char* schema) {
  auto re = json_schema_to_regex(nlohmann::ordered_json::parse(schema));
  EXPECT_TRUE(re.is_ok()) << re.status().message();
  auto d = ByteDfa::compile(re.is_ok() ? *re : "x");
  EXPECT_TRUE(d.is_ok()) << (re.is_ok() ? *re : "") << ": " << d.status().message();
  return std::move(*d);
}

TEST(JsonSchemaRegex, ObjectsWithRequiredAndOptionalProperties) {
  const ByteDfa d = dfa_of(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}, "ok": {"type": "boolean"}},
      "required": ["name", "ok"]})");
  for (const char* good : {R"({"name": "Ann", "ok": true})", R"({"name":"Ann","age":-3,"ok":false})",
                           R"({"name": "", "age": 41, "tags": ["a", "b"], "ok": true})",
                           R"({"name": "\u00e9\"x", "tags": [], "ok": false})"})
    EXPECT_TRUE(d.matches(good)) << good;
  for (const char* bad : {R"({"ok": true})", R"({"name": "Ann"})", R"({"ok": true, "name": "Ann"})",
                          R"({"name": "Ann", "ok": 1})", R"({"name": "Ann", "age": 1.5, "ok": true})",
                          R"({"name": "123456789", "ok": true})", R"({"name": "A", "tags": ["a","b","a"], "ok": true})",
                          R"({"name": "A", "ok": true, "x": 1})", R"({"name": "A",, "ok": true})"})
    EXPECT_FALSE(d.matches(bad)) << bad;
}

TEST(JsonSchemaRegex, ScalarsEnumsRefsAndUnions) {
  const ByteDfa num = dfa_of(R"({"type": "number"})");
  for (const char* good : {"0", "-1.25", "3e10", "2.5E-3"}) EXPECT_TRUE(num.matches(good)) << good;
  for (const char* bad : {"01", "1.", ".5", "+1", "1e"}) EXPECT_FALSE(num.matches(bad)) << bad;
  const ByteDfa u = dfa_of(R"({"anyOf": [{"type": "null"}, {"$ref": "#/$defs/p"}],
                               "$defs": {"p": {"type": "object", "properties": {"x": {"const": 7}}}}})");
  EXPECT_TRUE(u.matches("null"));
  EXPECT_TRUE(u.matches(R"({"x": 7})"));
  EXPECT_TRUE(u.matches("{}"));
  EXPECT_FALSE(u.matches(R"({"x": 8})"));
  const ByteDfa t = dfa_of(R"({"type": ["integer", "string"]})");
  EXPECT_TRUE(t.matches("12"));
  EXPECT_TRUE(t.matches("\"12\""));
  EXPECT_FALSE(t.matches("true"));
  const ByteDfa date = dfa_of(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(date.matches("\"2026-12-05\""));
  EXPECT_FALSE(date.matches("\"2026-13-05\""));
  const ByteDfa pat = dfa_of(R"({"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"})");
  EXPECT_TRUE(pat.matches("\"AB12\""));
  EXPECT_FALSE(pat.matches("\"A12\""));
  const ByteDfa any = dfa_of("{}");
  EXPECT_TRUE(any.matches(R"({"a": [1, "x"], "b": null})"));
  EXPECT_FALSE(any.matches(R"({"a": })"));
}

// Integer bounds against brute force: every integer in [-1200, 12500] matches exactly when the bounds admit it, for
// bounds on digit-count edges, negative / positive / straddling ranges, one side open, and the exclusive and
// fractional forms (draft 6 numbers, draft 4 booleans).
TEST(JsonSchemaRegex, IntegerBoundsAreExact) {
  const std::vector<std::optional<int64_t>> edges = {std::nullopt, -1005, -100, -99, -10, -1, 0, 1, 9, 10, 99, 100,
                                                    101, 999, 1000, 12345};
  int ranges = 0;
  for (const auto& lo : edges)
    for (const auto& hi : edges) {
      if (lo && hi && *lo > *hi) continue;
      nlohmann::ordered_json schema = {{"type", "integer"}};
      if (lo) schema["minimum"] = *lo;
      if (hi) schema["maximum"] = *hi;
      auto re = json_schema_to_regex(schema);
      ASSERT_TRUE(re.is_ok()) << schema.dump() << ": " << re.status().message();
      const ByteDfa d = ByteDfa::compile(*re).value();
      for (int64_t v = -1200; v <= 12500; ++v) {
        const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
        ASSERT_EQ(d.matches(std::to_string(v)), in) << schema.dump() << " at " << v << ": " << *re;
      }
      EXPECT_FALSE(d.matches("007")) << schema.dump();  // no leading zeros
      ++ranges;
    }
  EXPECT_GT(ranges, 100);
  const ByteDfa ex = dfa_of(R"({"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 7.5})");
  const ByteDfa d4 = dfa_of(R"({"type": "integer", "minimum": 2.5, "maximum": 9, "exclusiveMaximum": true})");
  for (int64_t v = -10; v <= 20; ++v) {
    EXPECT_EQ(ex.matches(std::to_string(v)), v > -3 && v < 7.5) << v;
    EXPECT_EQ(d4.matches(std::to_string(v)), v >= 3 && v < 9) << v;
  }
  for (const char* bad : {R"({"type": "integer", "minimum": 5, "maximum": 4})",
                          R"({"type": "integer", "maximum": 1e30})", R"({"type": "integer", "minimum": "3"})"}) {
    auto re = json_schema_to_regex(nlohmann::ordered_json::parse(bad));
    EXPECT_FALSE(re.is_ok()) << bad;
  }
}

// Number bounds against brute force: decimals with 0-3 fraction digits (some with trailing zeros) and both signs match
// exactly when the bounds admit their value ("-0..." never: no negative zero), for inclusive and exclusive bounds on
// both sides, fractional, integral, zero and one-sided; bounded numbers are plain decimals (no exponent).
TEST(JsonSchemaRegex, NumberBoundsAreExact) {
  const std::vector<std::optional<double>> edges = {std::nullopt, -12.5, -3, -0.5, 0, 0.25, 1, 2.5, 3.75, 10, 19.99,
                                                    24};
  const std::vector<std::string> fracs = {"", "0", "1", "15", "3", "5", "25", "05", "6", "8", "999", "001", "250",
                                          "75", "99", "5001"};
  std::vector<std::pair<std::string, int64_t>> numerals;  // text, value x 10000
  for (int ip = 0; ip <= 26; ++ip)
    for (const std::string& f : fracs) {
      std::string scaled = f;
      scaled.resize(4, '0');
      const int64_t mag = ip * 10000 + std::stoll(scaled);
      std::string text = std::to_string(ip);
      if (!f.empty()) text.append(".").append(f);
      numerals.emplace_back(text, mag);
      numerals.emplace_back(std::string("-").append(text), -mag);
    }
  int ranges = 0;
  for (const auto& lo : edges)
    for (const auto& hi : edges)
      for (int strict = 0; strict < 4; ++strict) {
        if (lo && hi && *lo > *hi) continue;
        const bool lo_strict = strict & 1, hi_strict = strict & 2;
        if ((lo_strict && !lo) || (hi_strict && !hi) || (!lo && !hi)) continue;  // (unbounded: any JSON number)
        nlohmann::ordered_json schema = {{"type", "number"}};
        if (lo) schema[lo_strict ? "exclusiveMinimum" : "minimum"] = *lo;
        if (hi) schema[hi_strict ? "exclusiveMaximum" : "maximum"] = *hi;
        const int64_t L = lo ? std::llround(*lo * 10000) : 0, H = hi ? std::llround(*hi * 10000) : 0;
        const auto admits = [&](int64_t v) {
          return (!lo || (lo_strict ? v > L : v >= L)) && (!hi || (hi_strict ? v < H : v <= H));
        };
        bool any = false;
        for (const auto& [text, v] : numerals) any = any || (admits(v) && !(text[0] == '-' && v == 0));
        auto re = json_schema_to_regex(schema);
        if (!any && lo && hi && *lo == *hi) {  // an empty range is refused
          EXPECT_FALSE(re.is_ok()) << schema.dump();
          continue;
        }
        ASSERT_TRUE(re.is_ok()) << schema.dump() << ": " << re.status().message();
        const ByteDfa d = ByteDfa::compile(*re).value();
        for (const auto& [text, v] : numerals) {
          const bool want = admits(v) && !(text[0] == '-' && v == 0);
          ASSERT_EQ(d.matches(text), want) << schema.dump() << " at " << text << ": " << *re;
        }
        EXPECT_FALSE(d.matches("01")) << schema.dump();  // no leading zeros
        EXPECT_FALSE(d.matches("1e1")) << schema.dump();  // no exponent once bounded
        ++ranges;
      }
  EXPECT_GT(ranges, 200);
  EXPECT_TRUE(dfa_of(R"({"type": "number"})").matches("1e1"));  // unbounded: any JSON number
  // Draft 4 booleans, two bounds on one side (the tighter wins), and the refusals.
  const ByteDfa d4 = dfa_of(R"({"type": "number", "minimum": 1.5, "exclusiveMinimum": true, "maximum": 2})");
  EXPECT_FALSE(d4.matches("1.5"));
  EXPECT_TRUE(d4.matches("1.5001"));
  EXPECT_TRUE(d4.matches("2.000"));
  const ByteDfa both = dfa_of(R"({"type": "number", "minimum": 3, "exclusiveMinimum": 3})");
  EXPECT_FALSE(both.matches("3"));
  EXPECT_TRUE(both.matches("3.01"));
  for (const char* bad : {R"({"type": "number", "minimum": 2, "maximum": 1.5})",
                          R"({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1})",
                          R"({"type": "number", "maximum": 1e30})", R"({"type": "number", "minimum": "1"})"}) {
    auto re = json_schema_to_regex(nlohmann::ordered_json::parse(bad));
    EXPECT_FALSE(re.is_ok()) << bad;
  }
}

TEST(JsonSchemaRegex, UnsupportedSchemasAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "tuple"})", "unknown type 'tuple'"},
      {R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})", "'allOf' of 2"},
      {R"({"$ref": "http://x/y"})", "only local"},
      {R"({"$ref": "#/$defs/missing"})", "points at nothing"},
      {R"({"$ref": "#", "type": "object"})", "deeper than 16"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "\"b\" is not among"},
      {R"({"type": "string", "minLength": 5, "maxLength": 2})", "maxLength < minLength"},
  };
  for (const auto& [schema, want] : cases) {
    auto re = json_schema_to_regex(nlohmann::ordered_json::parse(schema));
    ASSERT_FALSE(re.is_ok()) << schema;
    EXPECT_NE(re.status().message().find(want), std::string::npos) << schema << ": " << re.status().message();
  }
}

}  // namespace
}  // namespace ds
