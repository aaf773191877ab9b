// Streaming split of model output into reasoning_content and content for DeepSeek thinking models
// (SGLang's --reasoning-parser deepseek-r1 / deepseek-v3). Feed text chunk by chunk (e.g. one decoded
// token at a time); every chunk returns what is certain so far, and finish() flushes the rest.
#pragma once
#include <string>
#include <string_view>

#include "core/status.h"

namespace ds {

enum class ReasoningFormat {
  kDeepSeekR1,  // the prompt ends "<think>\n": text before </think> is reasoning, <think> optional
  kDeepSeekV3,  // V3.1 / V3.2: reasoning only when thinking is on (prompt ends "<think>")
};

// "deepseek-r1" or "deepseek-v3".
Result<ReasoningFormat> reasoning_format_from_name(std::string_view name);

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  // thinking: whether the prompt opened a thinking block (always true for deepseek-r1).
  ReasoningParser(ReasoningFormat format, bool thinking);

  ReasoningDelta feed(std::string_view chunk);
  ReasoningDelta finish();

  // The whole output at once; equal to the concatenation of feed() over any chunking plus finish().
  static ReasoningDelta parse(ReasoningFormat format, bool thinking, std::string_view text);

 private:
  ReasoningDelta drain(bool final);

  enum class State { kStart, kReasoning, kContent };
  State state_;
  std::string buf_;
};

}  // namespace ds
