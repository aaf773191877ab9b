// Tool-call block regexes: what the parser reads matches (V3, V3.1; one or several calls for "required", exactly
// one of the named function), other text and other functions do not; DSML and unknown names are refused by name.
#include "text/tool_call_grammar.h"

#include <gtest/gtest.h>

#include "text/regex_dfa.h"

namespace ds {
namespace {

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}])");

ByteDfa dfa(ToolCallFormat f, const std::string& only) {
  auto re = tool_call_regex(f, kTools, only);
  EXPECT_TRUE(re.is_ok()) << re.status().message();
  return ByteDfa::compile(*re).value();
}

TEST(ToolCallGrammar, MatchesWhatTheParserReads) {
  const std::string w = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>";
  const std::string n = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>now\n```json\n{}\n```<｜tool▁call▁end｜>";
  const ByteDfa any = dfa(ToolCallFormat::kDeepSeekV3, "");
  EXPECT_TRUE(any.matches("<｜tool▁calls▁begin｜>" + w + "<｜tool▁calls▁end｜>"));
  EXPECT_TRUE(any.matches("<｜tool▁calls▁begin｜>" + w + "\n" + n + "<｜tool▁calls▁end｜>"));
  EXPECT_FALSE(any.matches("<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>"));  // required: one call at least
  EXPECT_FALSE(any.matches("Sure.<｜tool▁calls▁begin｜>" + w + "<｜tool▁calls▁end｜>"));
  const ByteDfa named = dfa(ToolCallFormat::kDeepSeekV3, "now");
  EXPECT_TRUE(named.matches("<｜tool▁calls▁begin｜>" + n + "<｜tool▁calls▁end｜>"));
  EXPECT_FALSE(named.matches("<｜tool▁calls▁begin｜>" + w + "<｜tool▁calls▁end｜>"));
  EXPECT_FALSE(named.matches("<｜tool▁calls▁begin｜>" + n + n + "<｜tool▁calls▁end｜>"));
  const ByteDfa v31 = dfa(ToolCallFormat::kDeepSeekV31, "get_weather");
  EXPECT_TRUE(v31.matches("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}"
                          "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"));
  EXPECT_FALSE(v31.matches("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{}"
                           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"));  // city is required
}

TEST(ToolCallGrammar, RefusalsNameTheProblem) {
  auto dsml = tool_call_regex(ToolCallFormat::kDeepSeekV32, kTools, "");
  ASSERT_FALSE(dsml.is_ok());
  EXPECT_NE(dsml.status().message().find("deepseekv32"), std::string::npos);
  auto unknown = tool_call_regex(ToolCallFormat::kDeepSeekV3, kTools, "later");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("'later'"), std::string::npos);
  auto none = tool_call_regex(ToolCallFormat::kDeepSeekV3, nlohmann::ordered_json::array(), "");
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("needs 'tools'"), std::string::npos);
}

}  // namespace
}  // namespace ds
