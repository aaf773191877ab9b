// StepProfiler: what SGLang's /start_profile and /stop_profile do for an engine loop. While on, each step is one span
// from its planning to its completion (so overlapped steps overlap), with its batch shape; stopping (or num_steps
// steps) writes them as a Chrome trace (chrome://tracing, ui.perfetto.dev). Spans are host-side: a step's span covers
// its device time, not kernel by kernel (scripts/device/trace.sh does that). Thread-safe.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace ds {

struct ProfileOptions {
  std::string output_dir;               // empty: $SGLANG_TORCH_PROFILER_DIR, else /tmp (SGLang's)
  int64_t num_steps = 0;                // > 0: stop and write after this many steps
  std::vector<std::string> activities;  // SGLang's names (CPU, GPU, MEM, CUDA_PROFILER, RPD); all give step spans
  std::string tag = "TP-0";             // in the file name: <unix ms>-<tag>.trace.json (a DP rank's "DP-r")
};

// A completed step as the trace shows it.
struct StepSpan {
  uint64_t step_id = 0;
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;
  int32_t num_decode_seqs = 0;
  int32_t num_prefill_tokens = 0;
  int32_t num_draft_tokens = 0;  // speculative decoding: drafts verified in the step
};

class StepProfiler {
 public:
  using Clock = std::chrono::steady_clock;

  // Errors: already on; an output directory that does not exist or cannot be written; an unknown activity;
  // a negative num_steps.
  Status start(const ProfileOptions& options);
  // Writes the trace; its path in *path. Error: not on (or the file cannot be written: the spans are dropped).
  Status stop(std::string* path);
  Status stop(std::vector<std::string>* paths);  // the same, its path appended (Engine::stop_profile's form)
  bool active() const;

  // The engine loop's hooks (no-ops while off).
  void step_planned(uint64_t step_id);
  // After the num_steps-th span it writes the trace and turns off (its path: last_path()).
  void step_completed(const StepSpan& span);
  std::string last_path() const;

 private:
  struct Span {
    StepSpan s;
    Clock::time_point begin, end;
  };
  struct Trace {  // what a stop writes
    std::string file, tag;
    Clock::time_point origin;
    std::vector<Span> spans;
  };
  Trace take_locked();  // turns off; the spans and the file name
  static Status write(const Trace& t, std::string* path);

  mutable std::mutex mu_;
  // Written under mu_; read without it by the hooks, so a step costs no lock while profiling is off.
  std::atomic<bool> on_{false};
  ProfileOptions options_;
  std::string dir_;
  Clock::time_point origin_;
  int64_t wall_origin_ms_ = 0;
  std::unordered_map<uint64_t, Clock::time_point> planned_;
  std::vector<Span> spans_;
  std::string last_path_;
};

}  // namespace ds
