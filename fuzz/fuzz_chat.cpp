// libFuzzer target: chat rendering of arbitrary JSON "messages"/"tools" in every DeepSeek format.
#include <cstdint>
#include <string>

#include "text/chat_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ds::OrderedJson j = ds::OrderedJson::parse(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size,
                                             nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  const ds::OrderedJson messages = j.is_object() && j.contains("messages") ? j["messages"] : j;
  const ds::OrderedJson tools = j.is_object() && j.contains("tools") ? j["tools"] : ds::OrderedJson();
  for (const char* name : {"v2", "v3", "r1", "v31", "v32exp", "v32"}) {
    auto fmt = ds::chat_format_from_name(name);
    if (!fmt.is_ok()) continue;
    for (bool thinking : {false, true}) {
      ds::ChatRenderOptions opts;
      opts.thinking = thinking;
      opts.add_generation_prompt = true;
      (void)ds::render_chat(*fmt, messages, tools, opts);
    }
  }
  return 0;
}
