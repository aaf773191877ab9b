// ExpertRecorder: the host half of SGLang's expert distribution recorder (--expert-distribution-recorder-mode stat):
// what /start_, /stop_ and /dump_expert_distribution_record do with the per-layer, per-expert pick counts a
// DeepseekModel adds up on the device (enable_expert_counts), and the dump file. Used on the engine thread.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace ds {

enum class ExpertRecordOp { kStart, kStop, kDump };

// The recorder flags as SGLang names them. Errors name the problem: a mode other than stat (per_pass / per_token /
// stat_approx are SGLang's too, not built here), a buffer size other than -1 (stat keeps every step since the
// start, SGLang's -1) or given without a mode.
Status check_expert_recorder_flags(const std::string& mode, int64_t buffer_size, bool buffer_size_given);

// Where dumps go: $SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR, else /tmp (SGLang's).
std::string expert_recorder_dir();

class ExpertRecorder {
 public:
  // Reads the device counts ([layers * experts], row-major by layer) and zeroes them, ordered after the steps
  // already queued.
  using Drain = std::function<std::vector<int64_t>()>;

  ExpertRecorder(int layers, int experts, std::string dir)
      : layers_(layers), experts_(experts), dir_(std::move(dir)),
        total_(static_cast<size_t>(layers) * static_cast<size_t>(experts), 0) {}

  // kStart: from now on (again, if already on: the counts so far dropped, as SGLang). kStop: keeps the counts so
  // far for a dump (stopping when off: nothing). kDump: writes the counts kept (and, while on, those since the
  // last drain) to `*path` as JSON and forgets them; recording goes on if on. Errors: the file cannot be written
  // (the counts are kept).
  Status apply(ExpertRecordOp op, const Drain& drain, std::string* path);
  bool recording() const { return recording_; }
  // The counts kept so far ([layers * experts]).
  const std::vector<int64_t>& counts() const { return total_; }

 private:
  void add(const std::vector<int64_t>& more);

  int layers_, experts_;
  std::string dir_;
  bool recording_ = false;
  std::vector<int64_t> total_;  // [layers * experts]
  uint64_t dumps_ = 0;
};

}  // namespace ds
