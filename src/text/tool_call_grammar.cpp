// Tool-call block regexes (tool_call_grammar.h), matching what text/tool_call_parser.cpp reads.
#include "text/tool_call_grammar.h"

#include <set>
#include <string>
#include <vector>

#include "text/json_schema_regex.h"

namespace ds {

namespace {

// Raw text that never contains `tag` (whose only '<' is its first character: the parameter's closing tag), so that
// the tag after it is where the parser ends the value: runs without '<', each '<' followed by a '<'-free run that is a
// proper prefix of the tag's rest or leaves it at some character.
std::string text_without_tag(const std::string& tag) {
  std::vector<std::string> rest;  // the tag after its '<', a UTF-8 character each
  for (size_t i = 1; i < tag.size();) {
    const unsigned char c = static_cast<unsigned char>(tag[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    rest.push_back(tag.substr(i, n));
    i += n;
  }
  std::string alts, prefix;
  for (const std::string& ch : rest) {
    if (!prefix.empty()) alts += "|" + regex_escape(prefix);  // a proper prefix (the empty one: the group's '?')
    alts += (alts.empty() ? "" : "|") + regex_escape(prefix) + "[^" + ch + "<][^<]*";  // leaves the tag here
    prefix += ch;
  }
  return "[^<]*(<(" + alts + ")?)*";
}

// DSML (V3.2) parameters, one a line in the schema's property order (required ones always, the others optional): a
// plain string (or an enum of strings) written raw, string="true" (any text without the closing tag; with length
// bounds, any text without '<' within them; one of the enum's values), every other value as JSON of its schema,
// string="false" (the parser inserts it as written).
Result<std::string> dsml_params(const nlohmann::ordered_json& schema) {
  if (!schema.is_object() || !schema.contains("properties")) return std::string();  // no parameters
  const auto& props = schema["properties"];
  if (!props.is_object()) return error("'properties' must be an object");
  std::set<std::string> required;
  if (schema.contains("required") && schema["required"].is_array())
    for (const auto& r : schema["required"]) {
      // As the JSON-schema form (json_schema_to_regex) refuses it: a required name no property spells.
      if (!r.is_string() || !props.contains(r.get<std::string>()))
        return error("'required' names ", r.dump(), ", which is not among the properties");
      required.insert(r.get<std::string>());
    }
  std::string out;
  for (const auto& [key, s] : props.items()) {
    std::string value;
    const bool is_string = s.is_object() && s.contains("type") && s["type"] == "string" && !s.contains("pattern") &&
                           !s.contains("format") && !s.contains("const");
    bool enum_of_strings = s.is_object() && s.contains("enum") && s["enum"].is_array() && !s["enum"].empty();
    if (enum_of_strings)
      for (const auto& e : s["enum"]) enum_of_strings = enum_of_strings && e.is_string();
    if (enum_of_strings) {
      std::string alts;
      for (const auto& e : s["enum"]) alts += (alts.empty() ? "" : "|") + regex_escape(e.get<std::string>());
      value = "string=\"true\">(" + alts + ")";
    } else if (is_string) {
      const int64_t lo = s.contains("minLength") && s["minLength"].is_number_integer() ? s["minLength"].get<int64_t>() : 0;
      const int64_t hi = s.contains("maxLength") && s["maxLength"].is_number_integer() ? s["maxLength"].get<int64_t>() : -1;
      if (lo < 0 || (hi >= 0 && hi < lo)) return error("'", key, "': bad minLength / maxLength");
      value = lo == 0 && hi < 0 ? "string=\"true\">" + text_without_tag("</｜DSML｜parameter>")
                                : "string=\"true\">[^<]{" + std::to_string(lo) + "," +
                                      (hi >= 0 ? std::to_string(hi) : std::string()) + "}";
    } else {
      auto json = json_schema_to_regex(s);
      if (!json) return error("'", key, "': ", json.status().message());
      value = "string=\"false\">" + *json;
    }
    const std::string p = "<｜DSML｜parameter name=\"" + regex_escape(key) + "\" " + value + "</｜DSML｜parameter>\n";
    out += "(" + p + ")" + (required.count(key) ? "" : "?");
  }
  return out;
}

}  // namespace

Result<std::string> tool_call_regex(ToolCallFormat format, const nlohmann::ordered_json& tools,
                                    const std::string& only_name) {
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
    const std::string n = regex_escape(name);
    if (format == ToolCallFormat::kDeepSeekV32) {
      auto dsml = dsml_params(params);
      if (!dsml) return error("tools[", i, "] (", name, ") parameters: ", dsml.status().message());
      calls += (calls.empty() ? "" : "|") + std::string("(<｜DSML｜invoke name=\"") + n + "\">\n" + *dsml +
               "</｜DSML｜invoke>\n)";
      continue;
    }
    auto args = json_schema_to_regex(params);
    if (!args) return error("tools[", i, "] (", name, ") parameters: ", args.status().message());
    std::string call;
    if (format == ToolCallFormat::kDeepSeekV3)
      call = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n + "\n```json\n" + *args + "\n```<｜tool▁call▁end｜>";
    else
      call = "<｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>" + *args + "<｜tool▁call▁end｜>";
    calls += (calls.empty() ? "" : "|") + std::string("(") + call + ")";
  }
  if (calls.empty()) return error("tool_choice names the function '", only_name, "', which is not among the tools");
  calls = "(" + calls + ")";
  if (format == ToolCallFormat::kDeepSeekV32)  // the blank line V3.2's template writes before a block is optional
    return "(\n\n)?<｜DSML｜function_calls>\n" + calls + (only_name.empty() ? "+" : "") + "</｜DSML｜function_calls>";
  if (only_name.empty()) return "<｜tool▁calls▁begin｜>" + calls + "(\n?" + calls + ")*<｜tool▁calls▁end｜>";
  return "<｜tool▁calls▁begin｜>" + calls + "<｜tool▁calls▁end｜>";
}

}  // namespace ds
