// Integers from user text (flags, benchmark arguments): whole-string parses that report what was wrong.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ds {

// The whole of s as a base-10 integer (no trailing characters, in int64 range); false otherwise, *out unchanged.
bool parse_int64(const std::string& s, int64_t* out);
// Parses "3,17,42" (spaces around items allowed) into integers; the error names `what` and the bad item.
Result<std::vector<int64_t>> parse_int_list(const std::string& text, const std::string& what);

}  // namespace ds
