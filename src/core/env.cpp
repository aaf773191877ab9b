// The environment switches' readers (env.h).
#include "core/env.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ds {

const char* env_text(const char* name) {
  const char* e = std::getenv(name);
  return e && *e ? e : nullptr;
}

bool env_flag(const char* name, bool dflt) {
  const char* e = env_text(name);
  if (!e) return dflt;
  if (std::strcmp(e, "1") == 0) return true;
  if (std::strcmp(e, "0") == 0) return false;
  return dflt;
}

int64_t env_int(const char* name, int64_t dflt) {
  const char* e = env_text(name);
  if (!e) return dflt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(e, &end, 10);
  return end != e && *end == '\0' && errno == 0 ? static_cast<int64_t>(v) : dflt;
}

}  // namespace ds
