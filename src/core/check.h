// Internal invariants: DS_CHECK aborts with file:line and a message. Never used for user input
// (that goes through Status, see status.h). A thread that can still report a broken invariant to
// somebody (the serving engine loop: its in-flight clients) opts into throwing with ScopedCheckThrows.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ds {

// Thrown by a failed DS_CHECK on a thread inside a ScopedCheckThrows; what() = "file:line: DS_CHECK(...) ...".
class CheckFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
inline thread_local int check_throw_depth = 0;

[[noreturn]] inline void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::ostringstream os;
  os << file << ":" << line << ": DS_CHECK(" << cond << ") failed" << (msg.empty() ? "" : ": ") << msg;
  std::fprintf(stderr, "%s\n", os.str().c_str());
  std::fflush(stderr);
  // The state behind the check is broken either way; throwing only lets the owner of this thread fail its
  // work with the message (and exit) instead of vanishing. Destructors are noexcept: a check there aborts.
  if (check_throw_depth > 0) throw CheckFailure(os.str());
  std::abort();
}
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// While alive, DS_CHECK failures on this thread throw CheckFailure instead of aborting.
class ScopedCheckThrows {
 public:
  ScopedCheckThrows() { ++detail::check_throw_depth; }
  ~ScopedCheckThrows() { --detail::check_throw_depth; }
  ScopedCheckThrows(const ScopedCheckThrows&) = delete;
  ScopedCheckThrows& operator=(const ScopedCheckThrows&) = delete;
};

}  // namespace ds

// DS_CHECK(cond) or DS_CHECK(cond, "context ", value, ...)
#define DS_CHECK(cond, ...)                                                                   \
  do {                                                                                        \
    if (!(cond)) ::ds::detail::check_failed(__FILE__, __LINE__, #cond,                        \
                                            ::ds::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
