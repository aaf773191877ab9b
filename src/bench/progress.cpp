// Progress display (see progress.h).
#include "bench/progress.h"

#include <algorithm>
#include <cmath>

namespace ds::bench {

namespace {

std::string clock_text(double s) {
  const int64_t t = static_cast<int64_t>(s);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  }
  return buf;
}

}  // namespace

std::string progress_bar_text(int64_t done, int64_t total, double elapsed_s, int bar_width) {
  const double frac = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  // Eighth-block resolution, as tqdm draws it.
  static const char* kParts[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int eighths = static_cast<int>(frac * bar_width * 8);
  std::string bar;
  for (int i = 0; i < eighths / 8; ++i) bar += "█";
  int cells = eighths / 8;
  if (cells < bar_width && eighths % 8) {
    bar += kParts[eighths % 8];
    ++cells;
  }
  bar.append(static_cast<size_t>(bar_width - cells), ' ');
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0;
  const std::string remaining = rate > 0 ? clock_text(static_cast<double>(total - done) / rate) : "?";
  char head[16], tail[64];
  std::snprintf(head, sizeof(head), "%3d%%|", static_cast<int>(frac * 100));
  if (rate > 0) {
    std::snprintf(tail, sizeof(tail), ", %5.2fit/s]", rate);
  } else {
    std::snprintf(tail, sizeof(tail), ", ?it/s]");
  }
  return std::string(head) + bar + "| " + std::to_string(done) + "/" + std::to_string(total) + " [" +
         clock_text(elapsed_s) + "<" + remaining + tail;
}

std::string progress_plain_text(int64_t done, int64_t failed, int64_t total, double elapsed_s) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "bench-serving: %lld/%lld requests done (%lld failed), %.1f s",
                static_cast<long long>(done), static_cast<long long>(total), static_cast<long long>(failed), elapsed_s);
  return buf;
}

Progress::Progress(int64_t total, bool enabled, bool tty, std::FILE* out)
    : total_(total), enabled_(enabled), tty_(tty), out_(out) {}

void Progress::update(int64_t done, int64_t failed, double elapsed_s) {
  if (!enabled_) return;
  const double interval = tty_ ? 0.1 : 10.0;
  if (elapsed_s - last_draw_ < interval) return;
  last_draw_ = elapsed_s;
  if (tty_) {
    std::fprintf(out_, "\r%s", progress_bar_text(done, total_, elapsed_s).c_str());
  } else {
    std::fprintf(out_, "%s\n", progress_plain_text(done, failed, total_, elapsed_s).c_str());
  }
  std::fflush(out_);
}

void Progress::close(int64_t done, int64_t failed, double elapsed_s) {
  if (!enabled_) return;
  if (tty_) {
    std::fprintf(out_, "\r%s\n", progress_bar_text(done, total_, elapsed_s).c_str());
  } else {
    std::fprintf(out_, "%s\n", progress_plain_text(done, failed, total_, elapsed_s).c_str());
  }
  std::fflush(out_);
}

}  // namespace ds::bench
