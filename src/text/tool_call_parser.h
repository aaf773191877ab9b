// Streaming extraction of OpenAI tool calls from DeepSeek model output (SGLang's --tool-call-parser
// deepseekv3 / deepseekv31 / deepseekv32). Text outside tool-call blocks is content. A call is emitted
// once it is complete and valid, as one delta carrying id, name and the whole arguments string; a call
// that cannot be parsed (broken JSON, missing name, unterminated at the end) comes back as plain
// content instead, so malformed output never loses text.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ds {

enum class ToolCallFormat {
  kDeepSeekV3,   // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>...
  kDeepSeekV31,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...
  kDeepSeekV32,  // <｜DSML｜function_calls><｜DSML｜invoke name="NAME"><｜DSML｜parameter ...>...
};

// "deepseekv3", "deepseekv31" or "deepseekv32".
Result<ToolCallFormat> tool_call_format_from_name(std::string_view name);

struct ToolCall {
  std::string id;         // "call_" + 24 hex digits
  std::string name;
  std::string arguments;  // JSON object text, serialised like Python's json.dumps
};

// One streamed tool call (OpenAI choices[].delta.tool_calls[]): index counts calls in the response.
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ToolCallParseDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

class ToolCallParser {
 public:
  // id_seed: seeds the call-id generator (tests); 0 picks a random seed.
  explicit ToolCallParser(ToolCallFormat format, uint64_t id_seed = 0);

  ToolCallParseDelta feed(std::string_view chunk);
  ToolCallParseDelta finish();

  // All calls emitted so far, in order.
  const std::vector<ToolCall>& calls() const { return calls_; }

  struct Parsed {
    std::string content;
    std::vector<ToolCall> calls;
  };
  // The whole output at once; equal to the concatenation of feed() over any chunking plus finish().
  static Parsed parse(ToolCallFormat format, std::string_view text, uint64_t id_seed = 0);

 private:
  ToolCallParseDelta drain(bool final);
  // Parses the text between a call-begin and a call-end marker into name + arguments.
  bool parse_call_body(std::string_view body, std::string* name, std::string* arguments) const;
  void emit_call(std::string name, std::string arguments, ToolCallParseDelta* out);

  ToolCallFormat format_;
  std::string_view block_begin_, block_end_, call_begin_, call_end_;
  bool in_block_ = false;
  bool block_had_call_ = false;  // the current block produced a valid call
  std::string block_prefix_;     // opening text of the current block, until it produces a call
  std::string buf_;
  std::vector<ToolCall> calls_;
  std::mt19937_64 rng_;
};

}  // namespace ds
