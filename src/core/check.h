// Internal invariants: DS_CHECK aborts with file:line and a message. Never used for user input
// (that goes through Status, see status.h).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace ds::detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "%s:%d: DS_CHECK(%s) failed%s%s\n", file, line, cond, msg.empty() ? "" : ": ",
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace ds::detail

// DS_CHECK(cond) or DS_CHECK(cond, "context ", value, ...)
#define DS_CHECK(cond, ...)                                                                   \
  do {                                                                                        \
    if (!(cond)) ::ds::detail::check_failed(__FILE__, __LINE__, #cond,                        \
                                            ::ds::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
