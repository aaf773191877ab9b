// The Responses API translation: input items to chat messages (calls grouped into one assistant turn, outputs as tool
// messages), fields to chat fields, output items and their events from chat deltas, the reply as messages again,
// and the store's bound.
#include "http/responses_api.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(ResponsesApi, InputItemsBecomeChatMessages) {
  ResponsesRequest r;
  auto err = parse_responses_request(Json::parse(R"({"model": "m", "input": [
      {"role": "developer", "content": "Rules."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi "}, {"type": "input_text", "text": "there"}]},
      {"type": "reasoning", "summary": []},
      {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
      {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{\"a\":1}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "one"}],
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "f"}, "max_output_tokens": 9, "text": {"format": {"type": "json_object"}},
    "reasoning": {"effort": "high"}, "temperature": 0.5, "top_k": 4, "store": false, "user": "u"})"), &r);
  ASSERT_FALSE(err.has_value()) << err->message;
  const Json& m = r.input_messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0], Json::parse(R"({"role": "system", "content": "Rules."})"));
  EXPECT_EQ(m[1]["content"], "Hi there");
  EXPECT_EQ(m[2]["role"], "assistant");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[2]["tool_calls"][1]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(m[3], Json::parse(R"({"role": "tool", "tool_call_id": "call_1", "content": "one"})"));
  const Json& c = r.chat_body;
  EXPECT_EQ(c["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(c["tool_choice"]["function"]["name"], "f");
  EXPECT_EQ(c["max_tokens"], 9);
  EXPECT_EQ(c["response_format"]["type"], "json_object");
  EXPECT_EQ(c["chat_template_kwargs"]["thinking"], true);
  EXPECT_EQ(c["top_k"], 4);
  EXPECT_FALSE(c.contains("user"));
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.echo["max_output_tokens"], 9);
  EXPECT_EQ(r.echo["temperature"], 0.5);
}

TEST(ResponsesApi, WrongTypesAreRefusedByField) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"input": [{"type": 5}]})", "input"},
      {R"({"input": [{"role": 7, "content": "x"}]})", "input"},
      {R"({"input": [{"role": "user", "content": [{"type": 1, "text": "x"}]}]})", "input"},
      {R"({"input": "x", "tools": [{"type": 2}]})", "tools[0]"},
      {R"({"input": "x", "tool_choice": {"type": 3}})", "tool_choice"},
      {R"({"input": "x", "text": {"format": {"type": 4}}})", "text"},
      {R"({"input": "x", "reasoning": {"effort": 5}})", "reasoning"},
  };
  for (const auto& [body, param] : bad) {
    ResponsesRequest r;
    auto e = parse_responses_request(Json::parse(body), &r);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->param, param) << body << ": " << e->message;
  }
  ResponsesRequest named;  // a json_schema format whose name is not a string takes the default name
  ASSERT_FALSE(parse_responses_request(Json::parse(R"({"input": "x", "text": {"format": {"type": "json_schema",
      "name": 3, "schema": {"type": "object"}}}})"), &named));
  EXPECT_EQ(named.chat_body["response_format"]["json_schema"]["name"], "response");
}

TEST(ResponsesApi, ItemsAndEventsFromDeltas) {
  std::vector<std::string> types;
  ResponseItems items([&](const char* type, Json) { types.push_back(type); });
  ChatDelta a;
  a.reasoning = "think";
  items.feed(a);
  ChatDelta b;
  b.reasoning = "ing";
  b.content = "Hel";
  items.feed(b);
  ChatDelta c;
  c.content = "lo";
  c.tool_calls.push_back(ToolCallDelta{0, "call_x", "f", "{\"q\":"});
  items.feed(c);
  ChatDelta d;
  d.tool_calls.push_back(ToolCallDelta{0, "", "", "1}"});
  items.feed(d);
  items.close();
  items.close();  // idempotent
  const Json& out = items.items();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["content"][0]["text"], "thinking");
  EXPECT_EQ(out[1]["content"][0]["text"], "Hello");
  EXPECT_EQ(out[2]["arguments"], "{\"q\":1}");
  EXPECT_EQ(out[2]["call_id"], "call_x");
  for (const Json& o : out) EXPECT_EQ(o["status"], "completed");
  const std::vector<std::string> want = {
      "response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
      "response.reasoning_text.done", "response.output_item.done", "response.output_item.added",
      "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done"};
  EXPECT_EQ(types, want);
  const Json msgs = items.as_messages();
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0]["content"], "Hello");
  EXPECT_EQ(msgs[0]["tool_calls"][0]["function"]["arguments"], "{\"q\":1}");
  EXPECT_EQ(ResponseItems().as_messages(), Json::array());
}

TEST(ResponsesApi, StoreKeepsTheMostRecent) {
  ResponseStore store(2);
  store.put("a", {Json(1), Json::array()});
  store.put("b", {Json(2), Json::array()});
  ASSERT_TRUE(store.get("a"));  // a is now the most recent
  store.put("c", {Json(3), Json::array()});
  EXPECT_FALSE(store.get("b"));
  EXPECT_EQ(store.get("a")->response, 1);
  EXPECT_TRUE(store.erase("c"));
  EXPECT_FALSE(store.erase("c"));
  // The byte bound: a chain's growing conversations push the oldest out; one too large alone is not kept.
  ResponseStore small(100, 200);
  const Json turn = Json::array({Json{{"role", "user"}, {"content", std::string(60, 'x')}}});
  EXPECT_TRUE(small.put("r1", {Json(1), turn}));
  EXPECT_TRUE(small.put("r2", {Json(2), turn}));
  EXPECT_TRUE(small.put("r3", {Json(3), turn}));
  EXPECT_FALSE(small.get("r1"));  // 3 x ~90 bytes > 200
  EXPECT_TRUE(small.get("r3"));
  EXPECT_FALSE(small.put("big", {Json(4), Json::array({std::string(300, 'y')})}));
  EXPECT_FALSE(small.get("big"));
  EXPECT_TRUE(small.get("r3"));
}

}  // namespace
}  // namespace ds
