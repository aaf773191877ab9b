// bench-serving's live progress on stderr: a tqdm-style bar redrawn in place when stderr is a terminal,
// otherwise a plain line every few seconds (logs stay readable).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace ds::bench {

// "` 45%|████▌     | 45/100 [00:12<00:15,  3.61it/s]`" (tqdm's layout; elapsed seconds in, no '\r').
std::string progress_bar_text(int64_t done, int64_t total, double elapsed_s, int bar_width = 30);
// "bench-serving: 45/100 requests done (2 failed), 12.3 s"
std::string progress_plain_text(int64_t done, int64_t failed, int64_t total, double elapsed_s);

class Progress {
 public:
  // enabled=false prints nothing (--disable-tqdm); tty chooses the in-place bar.
  Progress(int64_t total, bool enabled, bool tty, std::FILE* out = stderr);
  // Call on every completion and from a periodic timer; draws at most every 0.1 s (tty) / 10 s (plain).
  void update(int64_t done, int64_t failed, double elapsed_s);
  // Final state, then a newline (tty) so the report starts on its own line.
  void close(int64_t done, int64_t failed, double elapsed_s);

 private:
  int64_t total_;
  bool enabled_, tty_;
  std::FILE* out_;
  double last_draw_ = -1e9;
};

}  // namespace ds::bench
