// Shared helpers of the tokenizer tests: where the real DeepSeek-V3 tokenizer and the golden file
// live, and loading them once per test process.
#pragma once
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace ds::testing {

inline std::string source_dir() {
  const char* env = std::getenv("DSERVE_SOURCE_DIR");
  return env ? env : DSERVE_SOURCE_DIR;
}
inline std::string v3_tokenizer_dir() { return source_dir() + "/tests/data/downloads/deepseek_v3_tokenizer"; }

// The DeepSeek-V3 tokenizer (fetched by scripts/fetch_test_tokenizer.sh), or nullptr after
// recording a test failure that says how to get it.
inline const Tokenizer* v3_tokenizer() {
  static Result<Tokenizer> tok = Tokenizer::load(v3_tokenizer_dir());
  if (!tok.is_ok()) {
    ADD_FAILURE() << tok.status().message() << " (run scripts/fetch_test_tokenizer.sh)";
    return nullptr;
  }
  return &tok.value();
}

inline const nlohmann::json& golden() {
  static nlohmann::json g = [] {
    std::ifstream f(source_dir() + "/tests/data/tokenizer_golden.json", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return nlohmann::json::parse(ss.str(), nullptr, false);
  }();
  return g;
}

inline std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

// Printable form of a string for failure messages.
inline std::string escaped(const std::string& s, size_t max = 120) {
  std::string out;
  for (unsigned char c : s.substr(0, max)) {
    if (c >= 0x20 && c != 0x7f) out += static_cast<char>(c);
    else {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    }
  }
  return s.size() > max ? out + "..." : out;
}

}  // namespace ds::testing
