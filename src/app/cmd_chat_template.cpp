// `dserve chat-template`: renders an OpenAI messages array (JSON on stdin) into the prompt text of a
// DeepSeek checkpoint's chat format, exactly as the server will feed it to the tokenizer.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "app/commands.h"
#include "app/flags.h"
#include "text/chat_format.h"

namespace ds {

int run_chat_template(int argc, char** argv) {
  Flags flags;
  flags.add_string("tokenizer-path", "", "checkpoint or tokenizer directory (tokenizer_config.json, config.json)");
  flags.add_string("template", "", "force a chat format: v2, v3, r1, v31, v32exp, v32 (default: detect)");
  flags.add_bool("thinking", "thinking mode (chat_template_kwargs {\"thinking\": true}) for v31, v32exp, v32");
  flags.add_bool("add-generation-prompt", "end with the assistant turn opener");
  flags.add_bool("help", "show flags");
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve chat-template: %s\n", st.message().c_str());
    return 1;
  };
  if (Status st = flags.parse(argc, argv); !st) return fail(st);
  if (flags.get_bool("help")) {
    std::printf("%s", flags.usage("chat-template").c_str());
    std::printf("\nreads a JSON messages array, or {\"messages\": [...], \"tools\": [...], "
                "\"chat_template_kwargs\": {\"thinking\": true}}, on stdin\n");
    return 0;
  }
  std::optional<ChatFormat> forced;
  if (!flags.get_string("template").empty()) {
    auto f = chat_format_from_name(flags.get_string("template"));
    if (!f) return fail(f.status());
    forced = *f;
  }
  ChatTemplateInfo info;
  const std::string dir = flags.get_string("tokenizer-path");
  if (!dir.empty()) {
    auto loaded = load_chat_template_info(dir, forced);
    if (!loaded) return fail(loaded.status());
    info = *loaded;
  } else if (forced) {
    info.format = *forced;
  } else {
    return fail(error("--tokenizer-path or --template is required"));
  }

  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto parsed = parse_json_text(input, "standard input");
  if (!parsed) return fail(parsed.status());
  OrderedJson messages, tools;
  ChatRenderOptions opt;
  opt.bos_token = info.bos_token;
  opt.eos_token = info.eos_token;
  opt.thinking = flags.get_bool("thinking");
  opt.add_generation_prompt = flags.get_bool("add-generation-prompt");
  if (parsed->is_array()) {
    messages = *parsed;
  } else if (parsed->is_object() && parsed->contains("messages")) {
    messages = (*parsed)["messages"];
    if (parsed->contains("tools")) tools = (*parsed)["tools"];
    if (auto kw = parsed->find("chat_template_kwargs"); kw != parsed->end() && kw->is_object()) {
      if (auto t = kw->find("thinking"); t != kw->end() && t->is_boolean()) opt.thinking = opt.thinking || t->get<bool>();
    }
    if (auto g = parsed->find("add_generation_prompt"); g != parsed->end() && g->is_boolean())
      opt.add_generation_prompt = opt.add_generation_prompt || g->get<bool>();
  } else {
    return fail(error("standard input must be a JSON messages array or an object with \"messages\""));
  }
  auto prompt = render_chat(info.format, messages, tools, opt);
  if (!prompt) return fail(prompt.status());
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  return 0;
}

}  // namespace ds
