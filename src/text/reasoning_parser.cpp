// Reasoning / content split (see reasoning_parser.h). A thinking block ends at </think>; a tool-call
// block that starts before </think> also ends it (the call is then left to the tool-call parser).
// An unterminated block stays reasoning: that is a thinking phase cut off by max_tokens, which is how
// SGLang and DeepSeek's API report it.
#include "text/reasoning_parser.h"

#include "text/parser_util.h"

namespace ds {
namespace {
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kV3CallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsmlCallsBegin = "<｜DSML｜function_calls>";
}  // namespace

Result<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  if (name == "deepseek-r1") return ReasoningFormat::kDeepSeekR1;
  if (name == "deepseek-v3") return ReasoningFormat::kDeepSeekV3;
  return error("unknown reasoning parser '", name, "' (expected deepseek-r1 or deepseek-v3)");
}

ReasoningParser::ReasoningParser(ReasoningFormat format, bool thinking) {
  const bool in_thinking = format == ReasoningFormat::kDeepSeekR1 || thinking;
  state_ = in_thinking ? State::kStart : State::kContent;
}

ReasoningDelta ReasoningParser::feed(std::string_view chunk) {
  buf_.append(chunk);
  return drain(false);
}

ReasoningDelta ReasoningParser::finish() { return drain(true); }

ReasoningDelta ReasoningParser::drain(bool final) {
  ReasoningDelta out;
  if (state_ == State::kStart) {
    // A model may repeat the <think> that the prompt already opened: drop it.
    if (buf_.size() < kThinkOpen.size() && kThinkOpen.substr(0, buf_.size()) == buf_ && !final) return out;
    if (buf_.compare(0, kThinkOpen.size(), kThinkOpen) == 0) buf_.erase(0, kThinkOpen.size());
    state_ = State::kReasoning;
  }
  if (state_ == State::kReasoning) {
    std::string_view which;
    const size_t p = find_first_marker(buf_, {kThinkClose, kV3CallsBegin, kDsmlCallsBegin}, &which);
    if (p != std::string::npos) {
      out.reasoning = buf_.substr(0, p);
      // </think> is consumed; a tool-call marker stays in the content for the tool-call parser.
      buf_.erase(0, which == kThinkClose ? p + kThinkClose.size() : p);
      state_ = State::kContent;
    } else {
      const size_t hold = final ? 0 : partial_marker_suffix(buf_, {kThinkClose, kV3CallsBegin, kDsmlCallsBegin});
      out.reasoning = buf_.substr(0, buf_.size() - hold);
      buf_.erase(0, buf_.size() - hold);
      return out;
    }
  }
  out.content += buf_;
  buf_.clear();
  return out;
}

ReasoningDelta ReasoningParser::parse(ReasoningFormat format, bool thinking, std::string_view text) {
  ReasoningParser p(format, thinking);
  ReasoningDelta a = p.feed(text);
  ReasoningDelta b = p.finish();
  a.reasoning += b.reasoning;
  a.content += b.content;
  return a;
}

}  // namespace ds
