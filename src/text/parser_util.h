// Small helpers shared by the streaming output parsers (reasoning_parser, tool_call_parser).
#pragma once
#include <algorithm>
#include <initializer_list>
#include <string_view>

namespace ds {

// Length of the longest suffix of `text` that is a proper prefix of one of `markers`: the bytes a
// streaming parser must hold back because the next chunk may complete a marker.
inline size_t partial_marker_suffix(std::string_view text, std::initializer_list<std::string_view> markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    const size_t max_len = std::min(text.size(), m.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (text.substr(text.size() - len) == m.substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

// First occurrence of any marker at or after `from`: position (npos if none) and which marker.
inline size_t find_first_marker(std::string_view text, std::initializer_list<std::string_view> markers,
                                std::string_view* which, size_t from = 0) {
  size_t best = std::string_view::npos;
  for (std::string_view m : markers) {
    const size_t p = text.find(m, from);
    if (p < best) {
      best = p;
      if (which) *which = m;
    }
  }
  return best;
}

inline bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view trim_json_space(std::string_view s) {
  while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace ds
