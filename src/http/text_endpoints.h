// SGLang's native text-parsing endpoints, /separate_reasoning and /parse_function_call: pure functions of a request
// body over the reasoning and tool-call parsers (no engine, no tokenizer).
#pragma once
#include <optional>

#include "http/api_request.h"

namespace ds {

// {"text", "reasoning_parser": "deepseek-r1" | "deepseek-v3"} -> {"reasoning_text", "text"}. deepseek-v3 (V3.1 /
// V3.2) text counts as thinking when it holds "</think>".
std::optional<ApiError> separate_reasoning(const Json& body, Json* out);

// {"text", "tool_call_parser": "deepseekv3" | "deepseekv31" | "deepseekv32", "tools": [...]} -> {"normal_text",
// "calls": [{"tool_index", "name", "parameters"}]}: tool_index is the tool's place in `tools`; a call of a function
// not in `tools` is dropped (as SGLang).
std::optional<ApiError> parse_function_call(const Json& body, Json* out);

}  // namespace ds
