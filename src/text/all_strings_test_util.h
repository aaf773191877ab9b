// Test helper of the automaton tests: calls f on every string over `alphabet` of length 0 to max_len, shortest first.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace ds {

inline void all_strings(const std::string& alphabet, int max_len, const std::function<void(const std::string&)>& f) {
  std::vector<std::string> level = {""};
  f("");
  for (int len = 1; len <= max_len; ++len) {
    std::vector<std::string> next;
    for (const std::string& s : level)
      for (char c : alphabet) {
        next.push_back(s + c);
        f(next.back());
      }
    level = std::move(next);
  }
}

}  // namespace ds
