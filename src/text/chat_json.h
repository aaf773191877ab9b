// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it (", " and ": "
// separators, key order kept, floats in repr form). The chat templates and the V3.2 encoder embed
// such text in prompts (tool schemas, tool-call arguments), so it must match byte for byte.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ds {

// Key order matters (Python dicts keep insertion order), so chat code uses ordered_json throughout.
using OrderedJson = nlohmann::ordered_json;

// json.dumps(value, ensure_ascii=False).
std::string py_json_dumps(const OrderedJson& value);

// repr(float): shortest round-trip digits, exponent form when the decimal exponent is < -4 or >= 16.
std::string py_float_repr(double value);

// Appends `s` as a JSON string literal (quotes included), escaping like json.dumps(ensure_ascii=False).
void py_json_append_string(std::string& out, std::string_view s);

// Parses JSON text; the error names `what`.
Result<OrderedJson> parse_json_text(std::string_view text, std::string_view what);

}  // namespace ds
