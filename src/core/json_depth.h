// JSON nesting depth, read from the text before it is parsed: nlohmann's copy and dump recurse once a level, so a
// request nesting arrays / objects 200,000 deep overflowed the stack (a server crash a request could cause). Bodies
// and JSON-valued string fields (schemas, tool-call arguments) are checked with this first.
#pragma once
#include <string_view>

namespace ds {

constexpr int kMaxJsonDepth = 512;

// Whether `text` opens more than `limit` arrays / objects inside one another (strings skipped; no validation).
bool json_nests_deeper(std::string_view text, int limit = kMaxJsonDepth);

}  // namespace ds
