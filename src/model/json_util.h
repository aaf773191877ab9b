// Small helpers for user-facing JSON errors (config.json, safetensors headers, index files).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace ds {

// nlohmann's message without its "[json.exception.parse_error.101] " tag; the rest names line and column.
inline std::string parse_error_text(const nlohmann::json::exception& e) {
  std::string s = e.what();
  if (!s.empty() && s[0] == '[') {
    size_t p = s.find("] ");
    if (p != std::string::npos) s = s.substr(p + 2);
  }
  return s;
}

}  // namespace ds
