// Integer parsing for user text (see parse.h).
#include "core/parse.h"

#include <cerrno>
#include <cstdlib>

namespace ds {

bool parse_int64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

Result<std::vector<int64_t>> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  if (text.empty()) return error(what, " is empty");
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    // Trim spaces.
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int64_t v;
    if (!parse_int64(item, &v)) return error(what, ": '", item, "' is not an integer");
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace ds
