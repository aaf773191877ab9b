// /separate_reasoning and /parse_function_call (see text_endpoints.h).
#include "http/text_endpoints.h"

#include <string>

#include "text/reasoning_parser.h"
#include "text/tool_call_parser.h"

namespace ds {
namespace {

std::optional<ApiError> required_string(const Json& body, const char* key, std::string* out) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string())
    return bad_request(std::string("'") + key + "' (a string) is required", key);
  *out = it->get<std::string>();
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> separate_reasoning(const Json& body, Json* out) {
  std::string text, parser;
  if (auto e = required_string(body, "text", &text)) return e;
  if (auto e = required_string(body, "reasoning_parser", &parser)) return e;
  Result<ReasoningFormat> format = reasoning_format_from_name(parser);
  if (!format) return bad_request(format.status().message(), "reasoning_parser");
  const bool thinking = *format == ReasoningFormat::kDeepSeekR1 || text.find("</think>") != std::string::npos;
  const ReasoningDelta d = ReasoningParser::parse(*format, thinking, text);
  *out = Json::object();
  (*out)["reasoning_text"] = d.reasoning;
  (*out)["text"] = d.content;
  return std::nullopt;
}

std::optional<ApiError> parse_function_call(const Json& body, Json* out) {
  std::string text, parser;
  if (auto e = required_string(body, "text", &text)) return e;
  if (auto e = required_string(body, "tool_call_parser", &parser)) return e;
  Result<ToolCallFormat> format = tool_call_format_from_name(parser);
  if (!format) return bad_request(format.status().message(), "tool_call_parser");
  auto tools = body.find("tools");
  if (tools == body.end() || !tools->is_array()) return bad_request("'tools' (an array) is required", "tools");
  std::vector<std::string> names;
  if (auto e = check_tools(*tools, &names)) return e;
  const ToolCallParser::Parsed parsed = ToolCallParser::parse(*format, text);
  Json calls = Json::array();
  for (const ToolCall& c : parsed.calls) {
    int index = -1;
    for (size_t i = 0; i < names.size() && index < 0; ++i)
      if (names[i] == c.name) index = static_cast<int>(i);
    if (index < 0) continue;  // a function the request did not offer
    calls.push_back(Json{{"tool_index", index}, {"name", c.name}, {"parameters", c.arguments}});
  }
  *out = Json::object();
  (*out)["normal_text"] = parsed.content;
  (*out)["calls"] = std::move(calls);
  return std::nullopt;
}

}  // namespace ds
