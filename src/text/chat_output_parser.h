// The two output parsers chained as a chat completion needs them: reasoning first (it ends at
// </think>), then tool calls in what remains. Streaming deltas map onto OpenAI choices[].delta
// {reasoning_content, content, tool_calls}; the accumulated message onto choices[].message.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/reasoning_parser.h"
#include "text/tool_call_parser.h"

namespace ds {

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ChatMessageOut {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

class ChatOutputParser {
 public:
  // Either parser may be absent (nullopt): its text passes through as content.
  ChatOutputParser(std::optional<ReasoningFormat> reasoning, bool thinking, std::optional<ToolCallFormat> tools,
                   uint64_t id_seed = 0);

  ChatDelta feed(std::string_view chunk);
  ChatDelta finish();

  // Everything parsed so far, accumulated.
  const ChatMessageOut& message() const { return message_; }

  static ChatMessageOut parse(std::optional<ReasoningFormat> reasoning, bool thinking,
                              std::optional<ToolCallFormat> tools, std::string_view text, uint64_t id_seed = 0);

 private:
  ChatDelta step(std::string_view chunk, bool final);

  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tools_;
  ChatMessageOut message_;
};

// Builds the optional parsers from SGLang-style names ("" = none).
Result<std::optional<ReasoningFormat>> reasoning_format_or_none(std::string_view name);
Result<std::optional<ToolCallFormat>> tool_call_format_or_none(std::string_view name);

}  // namespace ds
