// Tool-call block regexes (tool_call_grammar.h), matching what text/tool_call_parser.cpp reads.
#include "text/tool_call_grammar.h"

#include "text/json_schema_regex.h"

namespace ds {

Result<std::string> tool_call_regex(ToolCallFormat format, const nlohmann::ordered_json& tools,
                                    const std::string& only_name) {
  if (format == ToolCallFormat::kDeepSeekV32)
    return error("tool_choice \"required\" or a named function: the deepseekv32 (DSML) format cannot be "
                 "constrained yet; use tool_choice \"auto\"");
  if (!tools.is_array() || tools.empty()) return error("tool_choice \"required\" or a named function needs 'tools'");
  std::string calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& t = tools[i];
    const auto* f = t.contains("function") ? &t["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string())
      return error("tools[", i, "]: a function with a name is expected");
    const std::string name = (*f)["name"].get<std::string>();
    if (!only_name.empty() && name != only_name) continue;
    const nlohmann::ordered_json params =
        f->contains("parameters") && !(*f)["parameters"].is_null() ? (*f)["parameters"] : nlohmann::ordered_json{{"type", "object"}};
    auto args = json_schema_to_regex(params);
    if (!args) return error("tools[", i, "] (", name, ") parameters: ", args.status().message());
    const std::string n = regex_escape(name);
    std::string call;
    if (format == ToolCallFormat::kDeepSeekV3)
      call = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n + "\n```json\n" + *args + "\n```<｜tool▁call▁end｜>";
    else
      call = "<｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>" + *args + "<｜tool▁call▁end｜>";
    calls += (calls.empty() ? "" : "|") + std::string("(") + call + ")";
  }
  if (calls.empty()) return error("tool_choice names the function '", only_name, "', which is not among the tools");
  calls = "(" + calls + ")";
  if (only_name.empty()) return "<｜tool▁calls▁begin｜>" + calls + "(\n?" + calls + ")*<｜tool▁calls▁end｜>";
  return "<｜tool▁calls▁begin｜>" + calls + "<｜tool▁calls▁end｜>";
}

}  // namespace ds
