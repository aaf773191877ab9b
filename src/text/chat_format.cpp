// Native renderers of the DeepSeek chat templates (see chat_format.h). Each renderer follows its
// template statement by statement, quirks included (V3 never resets is_first / is_output_first, R1
// joins later tool outputs without "\n", ...), because prompts must match what the model was served
// with elsewhere. Where the reference raises (null user content, missing fields) we render something
// sensible instead; those inputs are not part of the golden tests.
#include "text/chat_format.h"

#include <fstream>
#include <sstream>
#include <vector>

namespace ds {
namespace {

constexpr std::string_view kUserTag = "<｜User｜>";
constexpr std::string_view kAssistantTag = "<｜Assistant｜>";
constexpr std::string_view kEosLit = "<｜end▁of▁sentence｜>";  // templates write it literally
constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kToolSep = "<｜tool▁sep｜>";
constexpr std::string_view kOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr std::string_view kOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr std::string_view kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kOutputEnd = "<｜tool▁output▁end｜>";
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kDsml = "｜DSML｜";

struct ToolCallIn {
  std::string type;
  std::string name;
  std::string arguments;  // JSON text as given (objects are serialised like json.dumps)
};

struct Msg {
  std::string role;
  std::optional<std::string> content;  // nullopt: null or absent
  bool has_tool_calls_key = false;     // 'tool_calls' in message (R1)
  bool tool_calls_non_null = false;    // tool_calls is defined and not none (V3.1)
  std::vector<ToolCallIn> tool_calls;
  std::optional<std::string> reasoning;
  bool prefix = false;
  const OrderedJson* json = nullptr;
};

bool truthy(const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::null: return false;
    case OrderedJson::value_t::boolean: return v.get<bool>();
    case OrderedJson::value_t::number_integer: return v.get<int64_t>() != 0;
    case OrderedJson::value_t::number_unsigned: return v.get<uint64_t>() != 0;
    case OrderedJson::value_t::number_float: return v.get<double>() != 0.0;
    case OrderedJson::value_t::string: return !v.get_ref<const std::string&>().empty();
    case OrderedJson::value_t::array:
    case OrderedJson::value_t::object: return !v.empty();
    default: return false;
  }
}

// A string, null/absent, or an array of text parts ({"type": "text", "text": ...}).
Result<std::optional<std::string>> text_field(const OrderedJson& m, const char* key, const std::string& where) {
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_array()) {
    std::string text;
    for (size_t j = 0; j < it->size(); ++j) {
      const OrderedJson& part = (*it)[j];
      auto t = part.is_object() ? part.find("text") : part.end();
      const bool is_text_type = part.is_object() && (!part.contains("type") || part["type"] == "text");
      if (!is_text_type || t == part.end() || !t->is_string())
        return error(where, ".", key, "[", j, "] is not a text part ({\"type\": \"text\", \"text\": ...})");
      text += t->get<std::string>();
    }
    return std::optional<std::string>(std::move(text));
  }
  return error(where, ".", key, " must be a string, null or a list of text parts");
}

}  // namespace

Result<std::string> chat_message_text(const OrderedJson& message, const std::string& where) {
  if (!message.is_object()) return error(where, " must be an object");
  DS_ASSIGN_OR_RETURN(std::optional<std::string> text, text_field(message, "content", where));
  return text.value_or("");
}

namespace {

Result<std::vector<Msg>> read_messages(const OrderedJson& messages) {
  if (!messages.is_array()) return error("messages must be a JSON array");
  std::vector<Msg> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const OrderedJson& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return error(where, " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return error(where, ".role missing or not a string");
    Msg msg;
    msg.role = role->get<std::string>();
    msg.json = &m;
    DS_ASSIGN_OR_RETURN(msg.content, text_field(m, "content", where));
    DS_ASSIGN_OR_RETURN(msg.reasoning, text_field(m, "reasoning_content", where));
    if (auto p = m.find("prefix"); p != m.end()) msg.prefix = truthy(*p);
    if (auto tc = m.find("tool_calls"); tc != m.end()) {
      msg.has_tool_calls_key = true;
      msg.tool_calls_non_null = !tc->is_null();
      if (!tc->is_null() && !tc->is_array()) return error(where, ".tool_calls must be an array");
      if (tc->is_array()) {
        for (size_t j = 0; j < tc->size(); ++j) {
          const OrderedJson& c = (*tc)[j];
          const std::string cw = where + ".tool_calls[" + std::to_string(j) + "]";
          if (!c.is_object()) return error(cw, " must be an object");
          auto fn = c.find("function");
          if (fn == c.end() || !fn->is_object()) return error(cw, ".function missing");
          auto name = fn->find("name");
          if (name == fn->end() || !name->is_string()) return error(cw, ".function.name missing");
          ToolCallIn call;
          call.name = name->get<std::string>();
          auto type = c.find("type");
          call.type = (type != c.end() && type->is_string()) ? type->get<std::string>() : "function";
          auto args = fn->find("arguments");
          if (args == fn->end() || args->is_null()) return error(cw, ".function.arguments missing");
          call.arguments = args->is_string() ? args->get<std::string>() : py_json_dumps(*args);
          msg.tool_calls.push_back(std::move(call));
        }
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

std::string joined_system_prompt(const std::vector<Msg>& msgs) {
  std::string sp;
  bool first = true;
  for (const Msg& m : msgs) {
    if (m.role != "system") continue;
    if (!first) sp += "\n\n";
    sp += m.content.value_or("");
    first = false;
  }
  return sp;
}

std::string v3_call(const ToolCallIn& c) {
  std::string s = c.type;
  s += kToolSep;
  s += c.name + "\n```json\n" + c.arguments + "\n```";
  s += kCallEnd;
  return s;
}

std::string v31_call(const ToolCallIn& c) {
  std::string s = c.name;
  s += kToolSep;
  s += c.arguments;
  s += kCallEnd;
  return s;
}

// ---------------------------------------------------------------------------------------------
// V2: DeepSeek-LLM style, system text rendered where it stands.
std::string render_v2(const std::vector<Msg>& msgs, const ChatRenderOptions& o) {
  std::string out = o.bos_token;
  for (const Msg& m : msgs) {
    if (m.role == "user") out += "User: " + m.content.value_or("") + "\n\n";
    else if (m.role == "assistant") out += "Assistant: " + m.content.value_or("") + o.eos_token;
    else if (m.role == "system") out += m.content.value_or("") + "\n\n";
  }
  if (o.add_generation_prompt) out += "Assistant:";
  return out;
}

// ---------------------------------------------------------------------------------------------
// V3 (tokenizer_config.json of DeepSeek-V3). is_first and is_output_first are never reset, and an
// assistant message with content renders as text even when it also has tool_calls.
std::string render_v3(const std::vector<Msg>& msgs, const ChatRenderOptions& o) {
  std::string out = o.bos_token + joined_system_prompt(msgs);
  bool is_first = false, is_tool = false, is_output_first = true;
  for (const Msg& m : msgs) {
    if (m.role == "user") {
      is_tool = false;
      out += kUserTag;
      out += m.content.value_or("");
    } else if (m.role == "assistant" && !m.content) {
      is_tool = false;
      for (const ToolCallIn& c : m.tool_calls) {
        if (!is_first) {
          out += kAssistantTag;
          out += kCallsBegin;
          out += kCallBegin;
          out += v3_call(c);
          is_first = true;
        } else {
          out += "\n";
          out += kCallBegin;
          out += v3_call(c);
          out += kCallsEnd;
          out += kEosLit;
        }
      }
    } else if (m.role == "assistant") {
      if (is_tool) {
        out += kOutputsEnd;
        out += *m.content;
        out += kEosLit;
        is_tool = false;
      } else {
        out += kAssistantTag;
        out += *m.content;
        out += kEosLit;
      }
    } else if (m.role == "tool") {
      is_tool = true;
      if (is_output_first) {
        out += kOutputsBegin;
        is_output_first = false;
      } else {
        out += "\n";
      }
      out += kOutputBegin;
      out += m.content.value_or("");
      out += kOutputEnd;
    }
  }
  if (is_tool) out += kOutputsEnd;
  if (o.add_generation_prompt && !is_tool) out += kAssistantTag;
  return out;
}

// ---------------------------------------------------------------------------------------------
// R1 (tokenizer_config.json of DeepSeek-R1): earlier answers keep only the text after the last
// </think>; the generation prompt opens a thinking block.
std::string render_r1(const std::vector<Msg>& msgs, const ChatRenderOptions& o) {
  std::string out = o.bos_token + joined_system_prompt(msgs);
  bool is_first = false, is_tool = false, is_output_first = true;
  for (const Msg& m : msgs) {
    const bool has_calls = m.has_tool_calls_key && m.tool_calls_non_null;
    if (m.role == "user") {
      is_tool = false;
      out += kUserTag;
      out += m.content.value_or("");
    } else if (m.role == "assistant" && has_calls) {
      is_tool = false;
      for (const ToolCallIn& c : m.tool_calls) {
        if (!is_first) {
          out += kAssistantTag;
          if (m.content) out += *m.content;
          out += kCallsBegin;
          out += kCallBegin;
          out += v3_call(c);
          is_first = true;
        } else {
          out += "\n";
          out += kCallBegin;
          out += v3_call(c);
        }
      }
      out += kCallsEnd;
      out += kEosLit;
    } else if (m.role == "assistant") {
      std::string content = m.content.value_or("");
      if (is_tool) {
        out += kOutputsEnd;
        out += content;
        out += kEosLit;
        is_tool = false;
      } else {
        if (size_t p = content.rfind(kThinkClose); p != std::string::npos)
          content = content.substr(p + kThinkClose.size());
        out += kAssistantTag;
        out += content;
        out += kEosLit;
      }
    } else if (m.role == "tool") {
      is_tool = true;
      if (is_output_first) {
        out += kOutputsBegin;
        is_output_first = false;
      }
      out += kOutputBegin;
      out += m.content.value_or("");
      out += kOutputEnd;
    }
  }
  if (is_tool) out += kOutputsEnd;
  if (o.add_generation_prompt && !is_tool) {
    out += kAssistantTag;
    out += "<think>\n";
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// V3.1 and V3.1-Terminus / V3.2-Exp (terminus = true adds is_only_sys and is_prefix).
Result<std::string> v31_tools_block(const OrderedJson& tools) {
  if (!tools.is_array()) return error("tools must be a JSON array");
  std::string t = "## Tools\nYou have access to the following tools:\n";
  for (size_t i = 0; i < tools.size(); ++i) {
    const OrderedJson& tool = tools[i];
    auto fn = tool.is_object() ? tool.find("function") : tool.end();
    if (!tool.is_object() || fn == tool.end() || !fn->is_object())
      return error("tools[", i, "].function missing");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) return error("tools[", i, "].function.name missing");
    auto desc = fn->find("description");
    auto params = fn->find("parameters");
    t += "\n### " + name->get<std::string>() + "\nDescription: ";
    if (desc != fn->end() && desc->is_string()) t += desc->get<std::string>();
    t += "\n\nParameters: ";
    t += params != fn->end() ? py_json_dumps(*params) : std::string("{}");
    t += "\n";
  }
  t += "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n";
  t += kCallsBegin;
  t += kCallBegin;
  t += "tool_call_name";
  t += kToolSep;
  t += "tool_call_arguments";
  t += kCallEnd;
  t += "{{additional_tool_calls}}";
  t += kCallsEnd;
  t += "\n\nWhere:\n\n"
       "- `tool_call_name` must be an exact match to one of the available tools\n"
       "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
       "- For multiple tool calls, chain them directly without separators or spaces\n";
  return t;
}

Result<std::string> render_v31(const std::vector<Msg>& msgs, const OrderedJson& tools,
                               const ChatRenderOptions& o, bool terminus) {
  std::string system_prompt = joined_system_prompt(msgs);
  bool is_only_sys = false;
  for (const Msg& m : msgs)
    if (m.role == "system") is_only_sys = true;
  if (!tools.is_null()) {
    DS_ASSIGN_OR_RETURN(std::string block, v31_tools_block(tools));
    system_prompt += "\n\n" + block;
  }
  if (!terminus) is_only_sys = false;
  std::string out = o.bos_token + system_prompt;
  bool is_first = false, is_tool = false, is_last_user = false, is_prefix = false;
  for (const Msg& m : msgs) {
    if (m.role == "user") {
      is_tool = false;
      is_first = false;
      is_last_user = true;
      out += kUserTag;
      out += m.content.value_or("");
    }
    if (m.role == "assistant" && m.tool_calls_non_null) {
      if (is_last_user || is_only_sys) {
        out += kAssistantTag;
        out += kThinkClose;
      }
      is_last_user = false;
      is_first = false;
      is_tool = false;
      for (const ToolCallIn& c : m.tool_calls) {
        if (!is_first) {
          if (m.content) out += *m.content;
          out += kCallsBegin;
          out += kCallBegin;
          out += v31_call(c);
          is_first = true;
        } else {
          out += kCallBegin;
          out += v31_call(c);
        }
      }
      out += kCallsEnd;
      out += kEosLit;
    }
    if (m.role == "assistant" && !m.tool_calls_non_null) {
      if (is_last_user) {
        out += kAssistantTag;
        out += (m.prefix && o.thinking) ? kThinkOpen : kThinkClose;
      }
      if (terminus && m.prefix) is_prefix = true;
      is_last_user = false;
      std::string content = m.content.value_or("");
      if (is_tool) {
        out += content;
        out += kEosLit;
        is_tool = false;
      } else {
        if (size_t p = content.find(kThinkClose); p != std::string::npos)
          content = content.substr(p + kThinkClose.size());
        out += content;
        out += kEosLit;
      }
    }
    if (m.role == "tool") {
      is_last_user = false;
      is_tool = true;
      out += kOutputBegin;
      out += m.content.value_or("");
      out += kOutputEnd;
    }
    if (terminus && m.role != "system") is_only_sys = false;
  }
  const bool gen = terminus ? (o.add_generation_prompt && !is_tool && (is_last_user || is_only_sys || !is_prefix))
                            : (o.add_generation_prompt && is_last_user && !is_tool);
  if (gen) {
    out += kAssistantTag;
    out += o.thinking ? kThinkOpen : kThinkClose;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// V3.2 (encoding_dsv32.encode_messages with drop_thinking=True, after the server's preprocessing:
// an empty system message first, carrying the request's tools).
Result<std::string> dsv32_tools_text(const OrderedJson& tools, const std::string& where) {
  std::string schemas;
  for (size_t i = 0; i < tools.size(); ++i) {
    auto fn = tools[i].is_object() ? tools[i].find("function") : tools[i].end();
    if (!tools[i].is_object() || fn == tools[i].end()) return error(where, "[", i, "].function missing");
    if (i) schemas += "\n";
    schemas += py_json_dumps(*fn);
  }
  const std::string d(kDsml);
  return std::string() + "## Tools\n\nYou have access to a set of tools you can use to answer the user's question.\n"
         "You can invoke functions by writing a \"<" + d + "function_calls>\" block like the following as "
         "part of your reply to the user:\n"
         "<" + d + "function_calls>\n<" + d + "invoke name=\"$FUNCTION_NAME\">\n"
         "<" + d + "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d +
         "parameter>\n...\n</" + d + "invoke>\n<" + d + "invoke name=\"$FUNCTION_NAME2\">\n...\n</" + d +
         "invoke>\n</" + d + "function_calls>\n\n"
         "String and scalar parameters should be specified as is without any escaping or quotes, while lists "
         "and objects should use JSON format. The \"string\" attribute should be set to \"true\" for string "
         "type parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n\n"
         "If the thinking_mode is enabled, then after function results you should strongly consider "
         "outputting a thinking block. Here is an example:\n\n"
         "<" + d + "function_calls>\n...\n</" + d + "function_calls>\n\n<function_results>\n...\n"
         "</function_results>\n\n<think>...thinking about results</think>\n\n"
         "Here are the functions available in JSONSchema format:\n<functions>\n" +
         schemas + "\n</functions>\n";
}

Result<std::string> dsv32_call(const ToolCallIn& c, const std::string& where) {
  DS_ASSIGN_OR_RETURN(OrderedJson args, parse_json_text(c.arguments, where + ".function.arguments"));
  if (!args.is_object()) return error(where, ".function.arguments must be a JSON object");
  const std::string d(kDsml);
  std::string s = "<" + d + "invoke name=\"" + c.name + "\">\n";
  bool first = true;
  for (auto it = args.begin(); it != args.end(); ++it) {
    if (!first) s += "\n";
    first = false;
    const bool is_str = it.value().is_string();
    s += "<" + d + "parameter name=\"" + it.key() + "\" string=\"" + (is_str ? "true" : "false") + "\">";
    s += is_str ? it.value().get<std::string>() : py_json_dumps(it.value());
    s += "</" + d + "parameter>";
  }
  s += "\n</" + d + "invoke>";
  return s;
}

Result<std::string> response_format_text(const OrderedJson& m) {
  auto rf = m.find("response_format");
  if (rf == m.end() || !truthy(*rf)) return std::string();
  return "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" +
         py_json_dumps(*rf);
}

Result<std::string> render_v32(const OrderedJson& messages_in, const OrderedJson& tools, const ChatRenderOptions& o) {
  if (!messages_in.is_array()) return error("messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array()) return error("tools must be a JSON array");
  OrderedJson messages = messages_in;
  auto is_system = [](const OrderedJson& m) {
    if (!m.is_object()) return false;
    auto r = m.find("role");
    return r != m.end() && r->is_string() && r->get_ref<const std::string&>() == "system";
  };
  if (messages.empty() || !is_system(messages[0]))
    messages.insert(messages.begin(), OrderedJson{{"role", "system"}, {"content", ""}});
  if (tools.is_array() && !tools.empty()) messages[0]["tools"] = tools;
  DS_ASSIGN_OR_RETURN(std::vector<Msg> msgs, read_messages(messages));
  const bool thinking = o.thinking;
  int last_user = -1;
  for (int i = static_cast<int>(msgs.size()) - 1; i >= 0; --i)
    if (msgs[i].role == "user" || msgs[i].role == "developer") {
      last_user = i;
      break;
    }
  // Message indices below are those of the caller's array (the inserted system message is not theirs).
  const int shift = static_cast<int>(messages.size() - messages_in.size());
  std::string out = o.bos_token;
  for (int i = 0; i < static_cast<int>(msgs.size()); ++i) {
    const Msg& m = msgs[i];
    const OrderedJson& mj = *m.json;
    const std::string where = "messages[" + std::to_string(i - shift) + "]";
    const std::string_view close = (i == last_user && thinking) ? kThinkOpen : kThinkClose;
    auto it_tools = mj.find("tools");
    const bool has_tools = it_tools != mj.end() && truthy(*it_tools);
    if (has_tools && !it_tools->is_array()) return error(where, ".tools must be an array");
    if (m.role == "system") {
      out += m.content.value_or("");
      if (has_tools) {
        DS_ASSIGN_OR_RETURN(std::string tt, dsv32_tools_text(*it_tools, i == 0 && tools.is_array() && !tools.empty() ? "tools" : where + ".tools"));
        out += "\n\n" + tt;
      }
      DS_ASSIGN_OR_RETURN(std::string rf, response_format_text(mj));
      out += rf;
    } else if (m.role == "developer") {
      std::string body;
      if (has_tools) {
        DS_ASSIGN_OR_RETURN(std::string tt, dsv32_tools_text(*it_tools, where + ".tools"));
        body += "\n\n" + tt;
      }
      DS_ASSIGN_OR_RETURN(std::string rf, response_format_text(mj));
      body += rf;
      body += "\n\n# The user's message is: " + m.content.value_or("");
      out += kUserTag;
      out += body;
      out += kAssistantTag;
      out += close;
    } else if (m.role == "user") {
      out += kUserTag;
      out += m.content.value_or("");
      out += kAssistantTag;
      out += close;
    } else if (m.role == "tool") {
      int j = i - 1;
      while (j >= 0 && msgs[j].role == "tool") --j;
      if (j < 0 || msgs[j].role != "assistant")
        return error(where, ": a tool message must follow an assistant message with tool_calls");
      const size_t order = static_cast<size_t>(i - j);
      const size_t ncalls = msgs[j].tool_calls.size();
      if (ncalls < order)
        return error(where, ": more tool results than tool_calls in messages[", j - shift, "]");
      if (order == 1) out += "\n\n<function_results>";
      out += "\n<result>" + m.content.value_or("") + "</result>";
      if (order == ncalls) {
        out += "\n</function_results>\n\n";
        out += (i >= last_user && thinking) ? kThinkOpen : kThinkClose;
      }
    } else if (m.role == "assistant") {
      std::string calls;
      if (!m.tool_calls.empty()) {
        const std::string d(kDsml);
        calls = "\n\n<" + d + "function_calls>\n";
        for (size_t k = 0; k < m.tool_calls.size(); ++k) {
          if (k) calls += "\n";
          DS_ASSIGN_OR_RETURN(std::string c, dsv32_call(m.tool_calls[k], where + ".tool_calls[" + std::to_string(k) + "]"));
          calls += c;
        }
        calls += "\n</" + d + "function_calls>";
      }
      // Reasoning is kept only for turns after the last user message (drop_thinking), in thinking mode.
      if (thinking && i > last_user) {
        out += m.reasoning.value_or("");
        out += kThinkClose;
      }
      out += m.content.value_or("");
      out += calls;
      out += kEosLit;
    } else {
      return error(where, ".role '", m.role, "' is not one of system, developer, user, assistant, tool");
    }
  }
  return out;
}

std::string read_file_text(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  *ok = static_cast<bool>(f);
  if (!f) return {};
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// bos_token / eos_token in tokenizer_config.json: a string or an AddedToken object with "content".
std::optional<std::string> token_text(const OrderedJson& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

const char* chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::kV2: return "v2";
    case ChatFormat::kV3: return "v3";
    case ChatFormat::kR1: return "r1";
    case ChatFormat::kV31: return "v31";
    case ChatFormat::kV32Exp: return "v32exp";
    case ChatFormat::kV32: return "v32";
  }
  return "?";
}

Result<ChatFormat> chat_format_from_name(std::string_view name) {
  if (name == "v2") return ChatFormat::kV2;
  if (name == "v3") return ChatFormat::kV3;
  if (name == "r1") return ChatFormat::kR1;
  if (name == "v31") return ChatFormat::kV31;
  if (name == "v32exp" || name == "v32-exp" || name == "v31-terminus") return ChatFormat::kV32Exp;
  if (name == "v32") return ChatFormat::kV32;
  return error("unknown chat template '", name, "' (expected v2, v3, r1, v31, v32exp or v32)");
}

Result<ChatFormat> detect_chat_format(std::string_view model_type, std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (!t.empty()) {
    if (has("｜DSML｜")) return ChatFormat::kV32;
    if (has("is_only_sys")) return ChatFormat::kV32Exp;  // V3.1-Terminus, V3.2-Exp
    if (has("<｜Assistant｜></think>")) return ChatFormat::kV31;
    if (has("<｜Assistant｜><think>")) return ChatFormat::kR1;
    if (has("'Assistant: ' + message['content'] + eos_token") || has("'User: ' + message['content']"))
      return ChatFormat::kV2;
    if (has("<｜User｜>") && has("<｜Assistant｜>")) return ChatFormat::kV3;
    return error("tokenizer_config.json chat_template is not a known DeepSeek template; pass --template "
                 "(v2, v3, r1, v31, v32exp, v32)");
  }
  // No template: DeepSeek-V3.2 ships none (encoding_dsv32.py instead); base checkpoints ship none.
  if (model_type == "deepseek_v32") return ChatFormat::kV32;
  if (model_type == "deepseek_v3") return ChatFormat::kV3;
  if (model_type == "deepseek_v2") return ChatFormat::kV2;
  return error("no chat_template in tokenizer_config.json and model_type '", model_type,
               "' has no default DeepSeek chat format; pass --template (v2, v3, r1, v31, v32exp, v32)");
}

const char* default_reasoning_parser(ChatFormat format) {
  switch (format) {
    case ChatFormat::kR1: return "deepseek-r1";
    case ChatFormat::kV31:
    case ChatFormat::kV32Exp:
    case ChatFormat::kV32: return "deepseek-v3";
    default: return "";
  }
}

const char* default_tool_call_parser(ChatFormat format) {
  switch (format) {
    case ChatFormat::kV3:
    case ChatFormat::kR1: return "deepseekv3";
    case ChatFormat::kV31:
    case ChatFormat::kV32Exp: return "deepseekv31";
    case ChatFormat::kV32: return "deepseekv32";
    default: return "";
  }
}

Result<ChatTemplateInfo> load_chat_template_info(const std::string& dir, std::optional<ChatFormat> forced) {
  ChatTemplateInfo info;
  bool ok = false;
  const std::string tc_path = dir + "/tokenizer_config.json";
  const std::string tc_text = read_file_text(tc_path, &ok);
  std::string chat_template;
  if (ok) {
    DS_ASSIGN_OR_RETURN(OrderedJson tc, parse_json_text(tc_text, tc_path));
    if (!tc.is_object()) return error(tc_path, " is not a JSON object");
    if (auto it = tc.find("chat_template"); it != tc.end() && it->is_string()) chat_template = it->get<std::string>();
    if (auto b = token_text(tc, "bos_token")) info.bos_token = *b;
    if (auto e = token_text(tc, "eos_token")) info.eos_token = *e;
  } else if (!forced) {
    return error("cannot read ", tc_path, " (needed to pick the chat format; or pass --template)");
  }
  if (forced) {
    info.format = *forced;
    return info;
  }
  std::string model_type;
  const std::string cfg_path = dir + "/config.json";
  const std::string cfg_text = read_file_text(cfg_path, &ok);
  if (ok) {
    DS_ASSIGN_OR_RETURN(OrderedJson cfg, parse_json_text(cfg_text, cfg_path));
    if (cfg.is_object() && cfg.contains("model_type") && cfg["model_type"].is_string())
      model_type = cfg["model_type"].get<std::string>();
  }
  DS_ASSIGN_OR_RETURN(info.format, detect_chat_format(model_type, chat_template));
  return info;
}

Result<std::string> render_chat(ChatFormat format, const OrderedJson& messages, const OrderedJson& tools,
                                const ChatRenderOptions& options) {
  if (format == ChatFormat::kV32) return render_v32(messages, tools, options);
  DS_ASSIGN_OR_RETURN(std::vector<Msg> msgs, read_messages(messages));
  switch (format) {
    case ChatFormat::kV2: return render_v2(msgs, options);
    case ChatFormat::kV3: return render_v3(msgs, options);
    case ChatFormat::kR1: return render_r1(msgs, options);
    case ChatFormat::kV31: return render_v31(msgs, tools, options, /*terminus=*/false);
    case ChatFormat::kV32Exp: return render_v31(msgs, tools, options, /*terminus=*/true);
    case ChatFormat::kV32: break;
  }
  return error("unhandled chat format");
}

}  // namespace ds
