// Minimal leveled logging to stderr. Level from DSERVE_LOG (debug|info|warn|error), default info.
#pragma once
#include <string>

#include "core/check.h"

namespace ds {
enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
LogLevel log_level();
void set_log_level(LogLevel level);
void log_line(LogLevel level, const std::string& msg);
}  // namespace ds

#define DS_LOG(level, ...)                                                              \
  do {                                                                                  \
    if (::ds::LogLevel::level >= ::ds::log_level())                                     \
      ::ds::log_line(::ds::LogLevel::level, ::ds::detail::concat(__VA_ARGS__));         \
  } while (0)
#define DS_INFO(...) DS_LOG(kInfo, __VA_ARGS__)
#define DS_WARN(...) DS_LOG(kWarn, __VA_ARGS__)
#define DS_DEBUG(...) DS_LOG(kDebug, __VA_ARGS__)
#define DS_ERROR(...) DS_LOG(kError, __VA_ARGS__)
