// Reasoning parser: expected splits written from the format rules (R1: text before </think> is
// reasoning, <think> optional; V3.1/V3.2: only with thinking on), complete and under every chunking.
#include "text/reasoning_parser.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

ReasoningDelta run_chunked(ReasoningFormat f, bool thinking, const std::string& text, size_t chunk) {
  ReasoningParser p(f, thinking);
  ReasoningDelta acc;
  for (size_t i = 0; i < text.size(); i += chunk) {
    ReasoningDelta d = p.feed(std::string_view(text).substr(i, chunk));
    acc.reasoning += d.reasoning;
    acc.content += d.content;
  }
  ReasoningDelta d = p.finish();
  acc.reasoning += d.reasoning;
  acc.content += d.content;
  return acc;
}

void expect_split(ReasoningFormat f, bool thinking, const std::string& text, const std::string& reasoning,
                  const std::string& content) {
  ReasoningDelta whole = ReasoningParser::parse(f, thinking, text);
  EXPECT_EQ(whole.reasoning, reasoning) << text;
  EXPECT_EQ(whole.content, content) << text;
  for (size_t chunk = 1; chunk <= text.size() + 1; ++chunk) {
    ReasoningDelta c = run_chunked(f, thinking, text, chunk);
    EXPECT_EQ(c.reasoning, reasoning) << "chunk " << chunk << ": " << text;
    EXPECT_EQ(c.content, content) << "chunk " << chunk << ": " << text;
  }
  // Every two-piece split.
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ReasoningParser p(f, thinking);
    ReasoningDelta a = p.feed(std::string_view(text).substr(0, cut));
    ReasoningDelta b = p.feed(std::string_view(text).substr(cut));
    ReasoningDelta e = p.finish();
    EXPECT_EQ(a.reasoning + b.reasoning + e.reasoning, reasoning) << "cut " << cut;
    EXPECT_EQ(a.content + b.content + e.content, content) << "cut " << cut;
  }
}

const auto kR1 = ReasoningFormat::kDeepSeekR1;
const auto kV3 = ReasoningFormat::kDeepSeekV3;

TEST(ReasoningParser, R1ReasoningWithoutOpeningTag) {
  expect_split(kR1, false, "Let me think.\n2+2=4.\n</think>\n\nThe answer is 4.", "Let me think.\n2+2=4.\n",
               "\n\nThe answer is 4.");
}

TEST(ReasoningParser, R1RepeatedOpeningTagIsDropped) {
  expect_split(kR1, false, "<think>\nhmm</think>done", "\nhmm", "done");
}

TEST(ReasoningParser, R1UnterminatedBlockStaysReasoning) {
  expect_split(kR1, false, "still thinking about 中文 <", "still thinking about 中文 <", "");
  expect_split(kR1, false, "abc</thi", "abc</thi", "");
}

TEST(ReasoningParser, OnlyFirstCloseTagSplits) {
  expect_split(kR1, false, "a</think>b</think>c", "a", "b</think>c");
  expect_split(kR1, false, "</think>", "", "");
}

TEST(ReasoningParser, V3ThinkingOffIsAllContent) {
  expect_split(kV3, false, "<think>x</think>y", "", "<think>x</think>y");
}

TEST(ReasoningParser, V3ThinkingOn) {
  expect_split(kV3, true, "Plan: check 😀.</think>Answer 😀", "Plan: check 😀.", "Answer 😀");
}

TEST(ReasoningParser, ToolCallBlockEndsReasoning) {
  const std::string v3 = "plan<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>";
  expect_split(kV3, true, v3, "plan", v3.substr(4));
  const std::string dsml = "plan\n\n<｜DSML｜function_calls>\n";
  expect_split(kV3, true, dsml, "plan\n\n", "<｜DSML｜function_calls>\n");
}

TEST(ReasoningParser, HoldsBackOnlyPossibleMarkers) {
  ReasoningParser p(kR1, false);
  ReasoningDelta a = p.feed("abc</th");
  EXPECT_EQ(a.reasoning, "abc");  // "</th" may start </think>
  ReasoningDelta b = p.feed("ink>def");
  EXPECT_EQ(b.reasoning, "");
  EXPECT_EQ(b.content, "def");
  ReasoningDelta c = p.feed("</think> more");
  EXPECT_EQ(c.content, "</think> more");  // content passes through untouched
  EXPECT_TRUE(p.finish().content.empty());

  ReasoningParser q(kR1, false);
  EXPECT_EQ(q.feed("<thi").reasoning, "");  // may be a repeated <think>
  EXPECT_EQ(q.feed("nk>x").reasoning, "x");
}

TEST(ReasoningParser, NamesParse) {
  EXPECT_EQ(*reasoning_format_from_name("deepseek-r1"), kR1);
  EXPECT_EQ(*reasoning_format_from_name("deepseek-v3"), kV3);
  EXPECT_FALSE(reasoning_format_from_name("qwen3").is_ok());
}

}  // namespace
}  // namespace ds
