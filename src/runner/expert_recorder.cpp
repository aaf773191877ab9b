// The expert distribution recorder's host half (expert_recorder.h).
#include "runner/expert_recorder.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ds {

Status check_expert_recorder_flags(const std::string& mode, int64_t buffer_size, bool buffer_size_given) {
  if (mode.empty()) {
    if (buffer_size_given) return error("--expert-distribution-recorder-buffer-size needs --expert-distribution-recorder-mode");
    return Status::ok();
  }
  if (mode == "per_pass" || mode == "per_token" || mode == "stat_approx")
    return error("--expert-distribution-recorder-mode ", mode, " is not supported (this server records stat: the picks "
                 "of every layer's experts summed over the steps)");
  if (mode != "stat") return error("--expert-distribution-recorder-mode must be stat, not '", mode, "'");
  if (buffer_size_given && buffer_size != -1)
    return error("--expert-distribution-recorder-buffer-size ", buffer_size, " is not supported: stat mode here keeps "
                 "every step since /start_expert_distribution_record (-1)");
  return Status::ok();
}

std::string expert_recorder_dir() {
  const char* d = std::getenv("SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR");
  return d && *d ? d : "/tmp";
}

void ExpertRecorder::add(const std::vector<int64_t>& more) {
  for (size_t i = 0; i < total_.size() && i < more.size(); ++i) total_[i] += more[i];
}

Status ExpertRecorder::apply(ExpertRecordOp op, const Drain& drain, std::string* path) {
  switch (op) {
    case ExpertRecordOp::kStart:
      (void)drain();  // what the device counted while off
      total_.assign(total_.size(), 0);
      recording_ = true;
      return Status::ok();
    case ExpertRecordOp::kStop:
      if (recording_) add(drain());
      recording_ = false;
      return Status::ok();
    case ExpertRecordOp::kDump:
      break;
  }
  if (recording_) add(drain());
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char name[96];
  std::snprintf(name, sizeof name, "expert_distribution_recorder_%.6f_%llu.json", now,
                static_cast<unsigned long long>(dumps_));
  const std::string file = (std::filesystem::path(dir_) / name).string();
  std::ofstream out(file);
  if (!out) return error("cannot write the expert distribution to '", file, "' (SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR)");
  // SGLang's stat dump holds logical_count [buffered steps, layers, experts]; here one entry, the sum of every step.
  out << "{\"rank\": 0, \"mode\": \"stat\", \"num_layers\": " << layers_ << ", \"num_logical_experts\": " << experts_
      << ", \"logical_count\": [[";
  for (int l = 0; l < layers_; ++l) {
    out << (l ? ",\n  [" : "\n  [");
    for (int e = 0; e < experts_; ++e) out << (e ? ", " : "") << total_[static_cast<size_t>(l) * experts_ + e];
    out << "]";
  }
  out << "]]}\n";
  out.close();
  if (!out) return error("cannot write the expert distribution to '", file, "'");
  ++dumps_;
  total_.assign(total_.size(), 0);
  *path = file;
  return Status::ok();
}

}  // namespace ds
