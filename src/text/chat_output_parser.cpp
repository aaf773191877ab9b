// Reasoning parser -> tool-call parser chain (see chat_output_parser.h).
#include "text/chat_output_parser.h"

namespace ds {

ChatOutputParser::ChatOutputParser(std::optional<ReasoningFormat> reasoning, bool thinking,
                                   std::optional<ToolCallFormat> tools, uint64_t id_seed) {
  if (reasoning) reasoning_.emplace(*reasoning, thinking);
  if (tools) tools_.emplace(*tools, id_seed);
}

ChatDelta ChatOutputParser::step(std::string_view chunk, bool final) {
  ChatDelta out;
  std::string content;
  if (reasoning_) {
    ReasoningDelta r = reasoning_->feed(chunk);
    if (final) {
      ReasoningDelta f = reasoning_->finish();
      r.reasoning += f.reasoning;
      r.content += f.content;
    }
    out.reasoning = std::move(r.reasoning);
    content = std::move(r.content);
  } else {
    content = std::string(chunk);
  }
  if (tools_) {
    ToolCallParseDelta t = tools_->feed(content);
    if (final) {
      ToolCallParseDelta f = tools_->finish();
      t.content += f.content;
      for (auto& c : f.calls) t.calls.push_back(std::move(c));
    }
    out.content = std::move(t.content);
    out.tool_calls = std::move(t.calls);
  } else {
    out.content = std::move(content);
  }
  message_.reasoning_content += out.reasoning;
  message_.content += out.content;
  for (const ToolCallDelta& d : out.tool_calls) message_.tool_calls.push_back(ToolCall{d.id, d.name, d.arguments});
  return out;
}

ChatDelta ChatOutputParser::feed(std::string_view chunk) { return step(chunk, false); }

ChatDelta ChatOutputParser::finish() { return step({}, true); }

ChatMessageOut ChatOutputParser::parse(std::optional<ReasoningFormat> reasoning, bool thinking,
                                       std::optional<ToolCallFormat> tools, std::string_view text, uint64_t id_seed) {
  ChatOutputParser p(reasoning, thinking, tools, id_seed);
  p.feed(text);
  p.finish();
  return p.message();
}

Result<std::optional<ReasoningFormat>> reasoning_format_or_none(std::string_view name) {
  if (name.empty() || name == "none") return std::optional<ReasoningFormat>();
  DS_ASSIGN_OR_RETURN(ReasoningFormat f, reasoning_format_from_name(name));
  return std::optional<ReasoningFormat>(f);
}

Result<std::optional<ToolCallFormat>> tool_call_format_or_none(std::string_view name) {
  if (name.empty() || name == "none") return std::optional<ToolCallFormat>();
  DS_ASSIGN_OR_RETURN(ToolCallFormat f, tool_call_format_from_name(name));
  return std::optional<ToolCallFormat>(f);
}

}  // namespace ds
