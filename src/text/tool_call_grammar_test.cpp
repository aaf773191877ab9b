// Tool-call block regexes: what the parser reads matches (V3, V3.1; one or several calls for "required", exactly
// one of the named function), other text and other functions do not; DSML (V3.2) likewise, parsed back into the
// arguments; unknown names and bad parameter schemas are refused by name.
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

// DSML (V3.2): invokes with one parameter line a property in the schema's order, plain strings raw (string="true"),
// other values as JSON (string="false"), optional parameters left out or not; what matches parses into the
// arguments a client expects.
TEST(ToolCallGrammar, DsmlMatchesWhatTheParserReads) {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "book", "parameters": {"type": "object", "properties": {
       "city": {"type": "string", "maxLength": 12}, "nights": {"type": "integer"},
       "class": {"enum": ["economy", "first"]}, "tags": {"type": "array", "items": {"type": "string"}}},
       "required": ["city", "nights"]}}},
    {"type": "function", "function": {"name": "now"}}])");
  auto re = tool_call_regex(ToolCallFormat::kDeepSeekV32, tools, "");
  ASSERT_TRUE(re.is_ok()) << re.status().message();
  const ByteDfa any = ByteDfa::compile(*re).value();
  const std::string book =
      "<｜DSML｜invoke name=\"book\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Nice, FR</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"nights\" string=\"false\">3</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"class\" string=\"true\">first</｜DSML｜parameter>\n</｜DSML｜invoke>\n";
  const std::string now = "<｜DSML｜invoke name=\"now\">\n</｜DSML｜invoke>\n";
  const std::string block = "\n\n<｜DSML｜function_calls>\n" + book + now + "</｜DSML｜function_calls>";
  ASSERT_TRUE(any.matches(block));
  EXPECT_TRUE(any.matches("<｜DSML｜function_calls>\n" + now + "</｜DSML｜function_calls>"));
  EXPECT_FALSE(any.matches("<｜DSML｜function_calls>\n</｜DSML｜function_calls>"));  // one call at least
  // nights is required; city is raw text of at most 12 characters without '<'; class is one of the enum's values.
  auto with = [&](const std::string& from, const std::string& to) {
    std::string b = block;
    b.replace(b.find(from), from.size(), to);
    return b;
  };
  EXPECT_FALSE(any.matches(with("<｜DSML｜parameter name=\"nights\" string=\"false\">3</｜DSML｜parameter>\n", "")));
  EXPECT_FALSE(any.matches(with("Nice, FR", "Nice, FR, France")));
  EXPECT_FALSE(any.matches(with("Nice, FR", "Nice<FR")));
  EXPECT_FALSE(any.matches(with(">first<", ">second<")));
  EXPECT_FALSE(any.matches(with(">3<", ">three<")));
  EXPECT_TRUE(any.matches(with("<｜DSML｜parameter name=\"class\" string=\"true\">first</｜DSML｜parameter>\n",
                               "<｜DSML｜parameter name=\"tags\" string=\"false\">[\"sea\"]</｜DSML｜parameter>\n")));
  ToolCallParser parser(ToolCallFormat::kDeepSeekV32);
  parser.feed(block);
  parser.finish();
  ASSERT_EQ(parser.calls().size(), 2u);
  EXPECT_EQ(parser.calls()[0].name, "book");
  EXPECT_EQ(nlohmann::json::parse(parser.calls()[0].arguments),
            nlohmann::json::parse(R"({"city": "Nice, FR", "nights": 3, "class": "first"})"));
  EXPECT_EQ(parser.calls()[1].name, "now");
  EXPECT_EQ(nlohmann::json::parse(parser.calls()[1].arguments), nlohmann::json::object());
  // Raw strings without length bounds may hold '<' and any part of the closing tag, not the whole of it; each parses
  // back as written.
  const nlohmann::ordered_json code_tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
       "code": {"type": "string"}}, "required": ["code"]}}}])");
  const ByteDfa code = ByteDfa::compile(tool_call_regex(ToolCallFormat::kDeepSeekV32, code_tools, "").value()).value();
  const auto call_with = [](const std::string& value) {
    return "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"run\">\n<｜DSML｜parameter name=\"code\" string=\"true\">" +
           value + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
  };
  for (const std::string value : {"a < b", "<div>x</div>", "<", "<<", "</", "if (a<b) {}\n", "</｜DSML", "x</｜DSML｜param",
                                  "</｜DSML｜parameter", "<｜DSML｜parameter>", "</｜DSML｜parameter<", ""}) {
    SCOPED_TRACE(value);
    ASSERT_TRUE(code.matches(call_with(value)));
    ToolCallParser p(ToolCallFormat::kDeepSeekV32);
    p.feed(call_with(value));
    p.finish();
    ASSERT_EQ(p.calls().size(), 1u);
    EXPECT_EQ(nlohmann::json::parse(p.calls()[0].arguments), (nlohmann::json{{"code", value}}));
  }
  EXPECT_FALSE(code.matches(call_with("a</｜DSML｜parameter>b")));  // the tag itself ends the value
  // A named function: exactly one invoke of it.
  const ByteDfa named = ByteDfa::compile(tool_call_regex(ToolCallFormat::kDeepSeekV32, tools, "now").value()).value();
  EXPECT_TRUE(named.matches("<｜DSML｜function_calls>\n" + now + "</｜DSML｜function_calls>"));
  EXPECT_FALSE(named.matches("<｜DSML｜function_calls>\n" + now + now + "</｜DSML｜function_calls>"));
  EXPECT_FALSE(named.matches(block));
}

TEST(ToolCallGrammar, RefusalsNameTheProblem) {
  auto bad = tool_call_regex(ToolCallFormat::kDeepSeekV32, nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
       "n": {"type": "string", "minLength": 5, "maxLength": 2}}}}}])"), "");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'n'"), std::string::npos) << bad.status().message();
  // A required name that no property spells, in both formats (DSML's own walk and the JSON schema converter).
  const auto missing = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
       "n": {"type": "integer"}}, "required": ["n", "m"]}}}])");
  for (const ToolCallFormat f : {ToolCallFormat::kDeepSeekV32, ToolCallFormat::kDeepSeekV3}) {
    auto r = tool_call_regex(f, missing, "");
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("\"m\""), std::string::npos) << r.status().message();
  }
  auto unknown = tool_call_regex(ToolCallFormat::kDeepSeekV3, kTools, "later");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("'later'"), std::string::npos);
  auto none = tool_call_regex(ToolCallFormat::kDeepSeekV3, nlohmann::ordered_json::array(), "");
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("needs 'tools'"), std::string::npos);
}

}  // namespace
}  // namespace ds
