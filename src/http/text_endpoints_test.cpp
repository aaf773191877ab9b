// /separate_reasoning and /parse_function_call bodies in and out, SGLang's shapes.
#include "http/text_endpoints.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(TextEndpoints, SeparateReasoning) {
  Json out;
  ASSERT_FALSE(separate_reasoning(Json{{"text", "Let me add.</think>42"}, {"reasoning_parser", "deepseek-r1"}}, &out));
  EXPECT_EQ(out["reasoning_text"], "Let me add.");
  EXPECT_EQ(out["text"], "42");
  // deepseek-v3 (V3.1 / V3.2): reasoning only where the text closes a thinking block.
  ASSERT_FALSE(separate_reasoning(Json{{"text", "plain answer"}, {"reasoning_parser", "deepseek-v3"}}, &out));
  EXPECT_EQ(out["reasoning_text"], "");
  EXPECT_EQ(out["text"], "plain answer");
  ASSERT_FALSE(separate_reasoning(Json{{"text", "hmm</think>yes"}, {"reasoning_parser", "deepseek-v3"}}, &out));
  EXPECT_EQ(out["reasoning_text"], "hmm");
  EXPECT_EQ(out["text"], "yes");
  auto e = separate_reasoning(Json{{"text", "x"}, {"reasoning_parser", "qwen3"}}, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "reasoning_parser");
  e = separate_reasoning(Json{{"reasoning_parser", "deepseek-r1"}}, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "text");
}

TEST(TextEndpoints, ParseFunctionCall) {
  const Json tools = Json::array({Json{{"type", "function"}, {"function", {{"name", "search"}}}},
                                  Json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}});
  const std::string text =
      "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\":\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>launch\n```json\n{}\n"
      "```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  Json out;
  ASSERT_FALSE(parse_function_call(Json{{"text", text}, {"tool_call_parser", "deepseekv3"}, {"tools", tools}}, &out));
  EXPECT_EQ(out["normal_text"], "Sure.");
  ASSERT_EQ(out["calls"].size(), 1u) << out.dump();  // "launch" was not offered
  EXPECT_EQ(out["calls"][0]["tool_index"], 1);
  EXPECT_EQ(out["calls"][0]["name"], "get_weather");
  EXPECT_EQ(out["calls"][0]["parameters"], "{\"city\": \"Paris\"}");
  auto e = parse_function_call(Json{{"text", text}, {"tool_call_parser", "deepseekv3"}}, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tools");
  e = parse_function_call(Json{{"text", text}, {"tool_call_parser", "hermes"}, {"tools", tools}}, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tool_call_parser");
  e = parse_function_call(Json{{"text", text}, {"tool_call_parser", "deepseekv3"}, {"tools", Json::array({1})}}, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tools[0]");
  // The chat request's check: a 'type' other than "function" is refused; none is SGLang's default.
  Json typed = tools;
  typed[1]["type"] = "retrieval";
  e = parse_function_call(Json{{"text", text}, {"tool_call_parser", "deepseekv3"}, {"tools", typed}}, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tools[1]");
  Json untyped = tools;
  untyped[1].erase("type");
  ASSERT_FALSE(parse_function_call(Json{{"text", text}, {"tool_call_parser", "deepseekv3"}, {"tools", untyped}}, &out));
  EXPECT_EQ(out["calls"].size(), 1u) << out.dump();
}

}  // namespace
}  // namespace ds
