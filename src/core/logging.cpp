// Logging sink: timestamped lines on stderr, one mutex so lines from threads never interleave.
#include "core/logging.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ds {
namespace {
LogLevel initial_level() {
  const char* env = std::getenv("DSERVE_LOG");
  if (!env) return LogLevel::kInfo;
  if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
  if (!std::strcmp(env, "warn")) return LogLevel::kWarn;
  if (!std::strcmp(env, "error")) return LogLevel::kError;
  return LogLevel::kInfo;
}
LogLevel g_level = initial_level();
std::mutex g_mu;
}  // namespace

LogLevel log_level() { return g_level; }
void set_log_level(LogLevel level) { g_level = level; }

void log_line(LogLevel level, const std::string& msg) {
  static const char* kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  using namespace std::chrono;
  double t = duration<double>(system_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[%.3f %s] %s\n", t, kNames[static_cast<int>(level)], msg.c_str());
}
}  // namespace ds
