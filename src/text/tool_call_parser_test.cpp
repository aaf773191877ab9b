// Tool-call parsers: hand-written outputs in each documented format, the tool-call blocks of the
// reference renderings (tests/data/chat_golden.json) parsed back into the messages' tool_calls, DeepSeek's
// V3.2 example, malformed output degrading to content, and every chunking giving the same result.
#include "text/tool_call_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <random>
#include <map>
#include <set>
#include <sstream>

#include "text/chat_json.h"
#include "text/chat_output_parser.h"

namespace ds {
namespace {

std::string read_data(const std::string& name) {
  std::ifstream f(std::string(DSERVE_SOURCE_DIR) + "/tests/data/" + name, std::ios::binary);
  EXPECT_TRUE(f) << "missing tests/data/" << name;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Expected {
  std::string name, arguments;
};

// Parses `text` whole, in fixed-size chunks and in two pieces at every cut; all must agree.
void expect_parse(ToolCallFormat f, const std::string& text, const std::string& content,
                  const std::vector<Expected>& calls) {
  auto check = [&](const std::string& got_content, const std::vector<ToolCall>& got_calls, const std::string& how) {
    EXPECT_EQ(got_content, content) << how;
    ASSERT_EQ(got_calls.size(), calls.size()) << how;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(got_calls[i].name, calls[i].name) << how;
      EXPECT_EQ(got_calls[i].arguments, calls[i].arguments) << how;
    }
  };
  auto whole = ToolCallParser::parse(f, text, 7);
  check(whole.content, whole.calls, "whole");
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{11}, size_t{64}}) {
    ToolCallParser p(f, 7);
    std::string got;
    int index = 0;
    for (size_t i = 0; i < text.size(); i += chunk) {
      ToolCallParseDelta d = p.feed(std::string_view(text).substr(i, chunk));
      got += d.content;
      for (const auto& c : d.calls) EXPECT_EQ(c.index, index++);
    }
    got += p.finish().content;
    check(got, p.calls(), "chunk " + std::to_string(chunk));
  }
  for (size_t cut = 0; cut <= text.size(); cut += 3) {
    ToolCallParser p(f, 7);
    std::string got = p.feed(std::string_view(text).substr(0, cut)).content;
    got += p.feed(std::string_view(text).substr(cut)).content;
    got += p.finish().content;
    check(got, p.calls(), "cut " + std::to_string(cut));
  }
}

const auto kV3 = ToolCallFormat::kDeepSeekV3;
const auto kV31 = ToolCallFormat::kDeepSeekV31;
const auto kV32 = ToolCallFormat::kDeepSeekV32;

TEST(ToolCallParser, DeepSeekV3Format) {
  expect_parse(kV3,
               "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
               "{\"city\":\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n"
               "```json\n{\"q\": [1,2], \"x\": 1.50}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "Sure.", {{"get_weather", "{\"city\": \"Paris\"}"}, {"search", "{\"q\": [1, 2], \"x\": 1.5}"}});
}

TEST(ToolCallParser, DeepSeekV31Format) {
  expect_parse(kV31,
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"東京\"}"
               "<｜tool▁call▁end｜><｜tool▁call▁begin｜>noop<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "", {{"get_weather", "{\"city\": \"東京\"}"}, {"noop", "{}"}});
}

TEST(ToolCallParser, DeepSeekV32Format) {
  // Strings are JSON-quoted, other values kept as written (encoding_dsv32's decoder).
  expect_parse(kV32,
               "Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"search\">\n"
               "<｜DSML｜parameter name=\"query\" string=\"true\">say \"hi\"\n</｜DSML｜parameter>\n"
               "<｜DSML｜parameter name=\"n\" string=\"false\">[1,2]</｜DSML｜parameter>\n"
               "<｜DSML｜parameter name=\"bad\" string=\"false\">not json</｜DSML｜parameter>\n"
               "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"ping\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
               "Checking.",
               {{"search", "{\"query\": \"say \\\"hi\\\"\\n\", \"n\": [1,2], \"bad\": \"not json\"}"}, {"ping", "{}"}});
}

TEST(ToolCallParser, TextAroundBlocksIsContent) {
  expect_parse(kV31,
               "Before <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\":1}<｜tool▁call▁end｜>"
               "<｜tool▁calls▁end｜> after",
               "Before after", {{"f", "{\"a\": 1}"}});
  expect_parse(kV3, "no tools here, just `code` and <tags>\n", "no tools here, just `code` and <tags>\n", {});
}

TEST(ToolCallParser, MalformedOutputDegradesToContent) {
  // Broken JSON: the whole block comes back verbatim.
  const std::string broken =
      "A<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{bad<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  expect_parse(kV31, broken, broken, {});
  // A valid call followed by a broken one: the first is a call, the second raw content.
  expect_parse(kV31,
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
               "<｜tool▁call▁begin｜>g<｜tool▁sep｜>[1<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "<｜tool▁call▁begin｜>g<｜tool▁sep｜>[1<｜tool▁call▁end｜>", {{"f", "{}"}});
  // Cut off inside a call, and inside a marker.
  const std::string cut = "Hi <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1";
  expect_parse(kV31, cut, cut, {});
  expect_parse(kV3, "Hello <｜tool▁ca", "Hello <｜tool▁ca", {});
  expect_parse(kV32, "x\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\"",
               "x\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\"", {});
  // Arguments that are JSON but not an object, and a call without a separator.
  expect_parse(kV31, "<｜tool▁call▁begin｜>f<｜tool▁sep｜>[1, 2]<｜tool▁call▁end｜>",
               "<｜tool▁call▁begin｜>f<｜tool▁sep｜>[1, 2]<｜tool▁call▁end｜>", {});
  expect_parse(kV3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁call▁end｜>",
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁call▁end｜>", {});
}

TEST(ToolCallParser, CallsAreEmittedOnlyWhenComplete) {
  ToolCallParser p(kV31, 3);
  auto a = p.feed("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}");
  EXPECT_TRUE(a.calls.empty());
  EXPECT_TRUE(a.content.empty());
  auto b = p.feed("<｜tool▁call▁end｜>");
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].index, 0);
  EXPECT_EQ(b.calls[0].name, "f");
  EXPECT_EQ(b.calls[0].arguments, "{\"a\": 1}");
  EXPECT_EQ(b.calls[0].id.size(), 29u);
  EXPECT_EQ(b.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(b.calls[0].id.find_first_not_of("0123456789abcdef", 5), std::string::npos);
}

TEST(ToolCallParser, IdsAreDistinct) {
  std::string text = "<｜tool▁calls▁begin｜>";
  for (int i = 0; i < 20; ++i) text += "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>";
  auto parsed = ToolCallParser::parse(kV31, text);
  std::set<std::string> ids;
  for (const auto& c : parsed.calls) ids.insert(c.id);
  EXPECT_EQ(ids.size(), 20u);
}

// The tool-call blocks of the reference renderings are model output in the trained format: each must
// parse back into the message's tool calls.
TEST(ToolCallParser, ReferenceRenderingsParseBack) {
  const OrderedJson g = OrderedJson::parse(read_data("chat_golden.json"));
  int checked = 0;
  for (const auto& c : g["cases"]) {
    const std::string fmt = c["format"].get<std::string>();
    std::string_view begin, end;
    ToolCallFormat tf;
    if (fmt == "r1") {
      begin = "<｜tool▁calls▁begin｜>", end = "<｜tool▁calls▁end｜>", tf = kV3;
    } else if (fmt == "v31" || fmt == "v32exp") {
      begin = "<｜tool▁calls▁begin｜>", end = "<｜tool▁calls▁end｜>", tf = kV31;
    } else if (fmt == "v32") {
      begin = "<｜DSML｜function_calls>", end = "</｜DSML｜function_calls>", tf = kV32;
    } else {
      continue;
    }
    std::vector<const OrderedJson*> with_calls;
    for (const auto& m : c["messages"])
      if (m.value("role", "") == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array())
        with_calls.push_back(&m);
    // R1's template never resets its first-call flag: later turns are not full blocks.
    if (with_calls.empty() || (fmt == "r1" && with_calls.size() != 1)) continue;
    const std::string expected = c["expected"].get<std::string>();
    // The tool descriptions in the system prompt show the markers too: search only the conversation.
    size_t pos = std::min(expected.find("<｜User｜>"), expected.find("<｜Assistant｜>"));
    if (pos == std::string::npos) {  // no user turn: skip the V3.1 tool description, if any
      const std::string tail = "without separators or spaces\n";
      const size_t f = expected.find(tail);
      pos = f == std::string::npos ? 0 : f + tail.size();
    }
    if (fmt == "v32") {
      const size_t f = expected.find("</functions>");
      pos = f == std::string::npos ? 0 : f;
    }
    for (const OrderedJson* m : with_calls) {
      const size_t b = expected.find(begin, pos);
      const size_t e = expected.find(end, b);
      ASSERT_NE(b, std::string::npos) << c["name"];
      ASSERT_NE(e, std::string::npos) << c["name"];
      const std::string block = std::string(fmt == "v32" ? "\n\n" : "") + expected.substr(b, e + end.size() - b);
      auto parsed = ToolCallParser::parse(tf, block);
      EXPECT_EQ(parsed.content, "") << c["name"];
      const auto& calls = (*m)["tool_calls"];
      ASSERT_EQ(parsed.calls.size(), calls.size()) << c["name"];
      for (size_t k = 0; k < calls.size(); ++k) {
        EXPECT_EQ(parsed.calls[k].name, calls[k]["function"]["name"].get<std::string>()) << c["name"];
        EXPECT_EQ(parsed.calls[k].arguments, calls[k]["function"]["arguments"].get<std::string>()) << c["name"];
      }
      pos = e + end.size();
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

// DeepSeek's own check: the thinking-mode completion of the last user turn of test_output.txt parses
// back into the assistant message of test_input.json (reasoning, content, tool calls).
TEST(ToolCallParser, DeepSeekV32CompletionRoundTrip) {
  const OrderedJson in = OrderedJson::parse(read_data("chat_dsv32_test_input.json"));
  const std::string prompt = read_data("chat_dsv32_test_output.txt");
  const std::string open = "谢谢！那后天呢？<｜Assistant｜><think>";
  const size_t b = prompt.find(open);
  ASSERT_NE(b, std::string::npos);
  const size_t start = b + open.size();
  const size_t e = prompt.find("<｜end▁of▁sentence｜>", start);
  const std::string completion = prompt.substr(start, e - start);
  const OrderedJson& want = in["messages"][9];
  for (size_t chunk : {completion.size(), size_t{1}, size_t{4}, size_t{17}}) {
    ChatOutputParser p(ReasoningFormat::kDeepSeekV3, true, kV32, 1);
    for (size_t i = 0; i < completion.size(); i += chunk) p.feed(std::string_view(completion).substr(i, chunk));
    p.finish();
    const ChatMessageOut& m = p.message();
    EXPECT_EQ(m.reasoning_content, want["reasoning_content"].get<std::string>());
    EXPECT_EQ(m.content, "");
    ASSERT_EQ(m.tool_calls.size(), want["tool_calls"].size());
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      EXPECT_EQ(m.tool_calls[k].name, want["tool_calls"][k]["function"]["name"].get<std::string>());
      EXPECT_EQ(m.tool_calls[k].arguments, want["tool_calls"][k]["function"]["arguments"].get<std::string>());
    }
  }
}

TEST(ChatOutputParser, R1ReasoningThenContentThenCalls) {
  const std::string out =
      "I should call the tool.</think>\n\nLet me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
      "<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  for (size_t chunk : {out.size(), size_t{1}, size_t{6}}) {
    ChatOutputParser p(ReasoningFormat::kDeepSeekR1, false, kV3, 5);
    std::string reasoning, content;
    std::vector<ToolCallDelta> calls;
    for (size_t i = 0; i < out.size(); i += chunk) {
      ChatDelta d = p.feed(std::string_view(out).substr(i, chunk));
      reasoning += d.reasoning;
      content += d.content;
      for (auto& c : d.tool_calls) calls.push_back(c);
    }
    ChatDelta d = p.finish();
    reasoning += d.reasoning;
    content += d.content;
    for (auto& c : d.tool_calls) calls.push_back(c);
    EXPECT_EQ(reasoning, "I should call the tool.");
    EXPECT_EQ(content, "\n\nLet me check.");
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].name, "get_weather");
    EXPECT_EQ(calls[0].arguments, "{\"city\": \"Oslo\"}");
    EXPECT_EQ(p.message().content, content);
    EXPECT_EQ(p.message().tool_calls.size(), 1u);
  }
  auto none = ChatOutputParser::parse(std::nullopt, false, std::nullopt, out);
  EXPECT_EQ(none.content, out);
  EXPECT_TRUE(none.tool_calls.empty());
}

TEST(ToolCallParser, NamesParse) {
  EXPECT_EQ(*tool_call_format_from_name("deepseekv3"), kV3);
  EXPECT_EQ(*tool_call_format_from_name("deepseekv31"), kV31);
  EXPECT_EQ(*tool_call_format_from_name("deepseekv32"), kV32);
  EXPECT_FALSE(tool_call_format_from_name("hermes").is_ok());
  auto none = tool_call_format_or_none("");
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
}

// Random model outputs made of the formats' markers, JSON pieces and multi-byte characters, streamed in random chunks
// through every parser combination: never a crash, and the streamed reasoning, content and calls equal the whole
// parse (the chat and Responses streams rely on it).
TEST(ChatOutputParser, RandomOutputsStreamLikeTheWholeParse) {
  const std::vector<std::string> pieces = {
      "<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
      "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "function", "get_weather", "\n```json\n", "\n```", "{\"city\": \"Oslo\"}",
      "{", "}", "\"", ":", "<｜DSML｜function_calls>", "</｜DSML｜function_calls>", "<｜DSML｜invoke name=\"f\">",
      "</｜DSML｜invoke>", "<｜DSML｜parameter name=\"a\" string=\"true\">", "</｜DSML｜parameter>", "x", " ", "\n",
      "é", "日本", "<", "｜", "<｜", "think", "<｜tool"};
  std::mt19937 rng(63);
  const std::vector<std::optional<ReasoningFormat>> reasonings = {std::nullopt, ReasoningFormat::kDeepSeekR1,
                                                                  ReasoningFormat::kDeepSeekV3};
  const std::vector<std::optional<ToolCallFormat>> tool_formats = {std::nullopt, kV3, kV31, kV32};
  for (int trial = 0; trial < 1000; ++trial) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 24)(rng);
    for (int i = 0; i < n; ++i) text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
    for (const auto& rf : reasonings)
      for (const auto& tf : tool_formats)
        for (bool thinking : {false, true}) {
          const ChatMessageOut whole = ChatOutputParser::parse(rf, thinking, tf, text, 9);
          ChatOutputParser p(rf, thinking, tf, 9);
          std::string reasoning, content;
          std::vector<ToolCallDelta> calls;
          auto take = [&](const ChatDelta& d) {
            reasoning += d.reasoning;
            content += d.content;
            for (const auto& c : d.tool_calls) calls.push_back(c);
          };
          for (size_t at = 0; at < text.size();) {  // random cuts, multi-byte characters split too
            const size_t len = std::uniform_int_distribution<size_t>(1, 9)(rng);
            take(p.feed(std::string_view(text).substr(at, len)));
            at += len;
          }
          take(p.finish());
          const std::string how = "'" + text + "' thinking " + std::to_string(thinking);
          ASSERT_EQ(reasoning, whole.reasoning_content) << how;
          ASSERT_EQ(content, whole.content) << how;
          ASSERT_EQ(p.message().content, whole.content) << how;
          ASSERT_EQ(p.message().tool_calls.size(), whole.tool_calls.size()) << how;
          for (size_t k = 0; k < whole.tool_calls.size(); ++k) {
            EXPECT_EQ(p.message().tool_calls[k].name, whole.tool_calls[k].name) << how;
            EXPECT_EQ(p.message().tool_calls[k].arguments, whole.tool_calls[k].arguments) << how;
          }
          std::map<int, std::string> args;  // the streamed deltas add up to the calls
          for (const auto& c : calls) args[c.index] += c.arguments;
          ASSERT_EQ(args.size(), whole.tool_calls.size()) << how;
          for (const auto& [k, a] : args) EXPECT_EQ(a, whole.tool_calls[static_cast<size_t>(k)].arguments) << how;
        }
  }
}

}  // namespace
}  // namespace ds
