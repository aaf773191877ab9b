// The regex of a tool-call block in DeepSeek's formats, for tool_choice "required" (one call or more, any of the
// tools) and a named function (exactly one call of it): the markers, each call's name and its arguments as JSON of
// the tool's parameter schema (text/json_schema_regex.h); in DSML (V3.2) each call an invoke with one parameter line a
// property (plain strings raw, other values as JSON of their schema).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "text/tool_call_parser.h"

namespace ds {

// tools: the request's OpenAI tools array ({"type": "function", "function": {"name", "parameters"}}), in the
// body's own order (its schemas' property order is the arguments'); only_name: empty for "required", else the
// function to call. Errors name an unknown function, an unsupported format or parameter schema.
Result<std::string> tool_call_regex(ToolCallFormat format, const nlohmann::ordered_json& tools,
                                    const std::string& only_name);

}  // namespace ds
