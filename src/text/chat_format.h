// DeepSeek chat prompt formats (V2, V3, R1, V3.1, V3.1-Terminus/V3.2-Exp, V3.2), rendered natively from
// an OpenAI `messages` array, byte-identical to the checkpoints' Jinja chat templates (and to DeepSeek's
// encoding_dsv32.py for V3.2). Also picks the format of a checkpoint and the matching output parsers.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "text/chat_json.h"

namespace ds {

inline constexpr std::string_view kDeepSeekBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kDeepSeekEos = "<｜end▁of▁sentence｜>";

enum class ChatFormat {
  kV2,      // DeepSeek-V2(-Lite)-Chat: "User: ...\n\nAssistant: ..."
  kV3,      // DeepSeek-V3 template (tool calls with ```json fences), template quirks included
  kR1,      // DeepSeek-R1: as V3, history stripped to after </think>, prompt ends "<think>\n"
  kV31,     // DeepSeek-V3.1: hybrid thinking (</think> or <think> after <｜Assistant｜>)
  kV32Exp,  // DeepSeek-V3.1-Terminus and V3.2-Exp: V3.1 plus the is_only_sys / prefix rules
  kV32,     // DeepSeek-V3.2: encoding_dsv32 (DSML tool calls, tools described in the system prompt)
};

// "v2", "v3", "r1", "v31", "v32exp", "v32".
const char* chat_format_name(ChatFormat format);
// Accepts the names above (and "v31-terminus", "v32-exp" as aliases of v32exp).
Result<ChatFormat> chat_format_from_name(std::string_view name);

// From config.json's model_type and tokenizer_config.json's chat_template ("" when it has none).
Result<ChatFormat> detect_chat_format(std::string_view model_type, std::string_view chat_template);

// SGLang parser names for a format: reasoning "deepseek-r1" / "deepseek-v3" / "" (none), tool calls
// "deepseekv3" / "deepseekv31" / "deepseekv32" / "" (none).
const char* default_reasoning_parser(ChatFormat format);
const char* default_tool_call_parser(ChatFormat format);

struct ChatTemplateInfo {
  ChatFormat format = ChatFormat::kV3;
  std::string bos_token{kDeepSeekBos};
  std::string eos_token{kDeepSeekEos};
};

// Reads DIR/tokenizer_config.json (chat_template, bos_token, eos_token) and DIR/config.json (model_type)
// when present. `forced` (from --template) overrides the detected format.
Result<ChatTemplateInfo> load_chat_template_info(const std::string& dir, std::optional<ChatFormat> forced);

struct ChatRenderOptions {
  bool add_generation_prompt = false;  // ignored by v32, whose user turns already end the prompt
  bool thinking = false;               // chat_template_kwargs {"thinking": true}: v31, v32exp, v32
  std::string bos_token{kDeepSeekBos};
  std::string eos_token{kDeepSeekEos};
};

// messages: array of {role: system|user|assistant|tool (|developer for v32), content: string | null |
// [{type: text, text}], reasoning_content?, tool_calls? [{id, type, function {name, arguments}}],
// tool_call_id?, prefix?}. tools: null or an array of {type: function, function {name, description,
// parameters}}. v2, v3 and r1 ignore `tools` as their official templates do; v31/v32exp append the
// V3.1 model card's tool block to the system prompt; v32 attaches them to the first system message.
Result<std::string> render_chat(ChatFormat format, const OrderedJson& messages, const OrderedJson& tools,
                                const ChatRenderOptions& options);

// A message's content as text (a string, null, or text parts joined); the error names `where`.
Result<std::string> chat_message_text(const OrderedJson& message, const std::string& where);

}  // namespace ds
