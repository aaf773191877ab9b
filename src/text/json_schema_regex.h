// JSON schema -> a regular expression of the JSON texts it admits (SGLang's `json_schema` sampling parameter and
// OpenAI's response_format {"type": "json_schema"}), for ByteDfa. Compact JSON with at most one space after ':' and
// ',' (the regex stays small), object properties in the schema's order (required ones present, optional ones
// omissible, no others). Handled: type (one or a list), string (minLength, maxLength, pattern, format date-time /
// date / time / uuid / email), integer and number (minimum, maximum, exclusiveMinimum, exclusiveMaximum: exact
// bounds; a bounded number is a plain decimal, no exponent), boolean, null, enum, const, array (items, minItems,
// maxItems, prefixItems), object (properties, required), anyOf / oneOf, allOf of one schema, $ref into #/$defs or
// #/definitions (not recursive). A schema without a type admits any JSON value nested at most two levels.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ds {

// An error names the unsupported keyword or bad value and its JSON pointer in the schema. An ordered_json keeps the
// schema's property order (the order the properties are written in).
Result<std::string> json_schema_to_regex(const nlohmann::ordered_json& schema);

// Escapes regex metacharacters of `text` (a literal for ByteDfa).
std::string regex_escape(const std::string& text);

}  // namespace ds
