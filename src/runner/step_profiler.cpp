// StepProfiler (step_profiler.h): the spans and their Chrome trace file.
#include "runner/step_profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/logging.h"

namespace ds {
namespace {

// SGLang's ProfileReqInput activities.
constexpr const char* kActivities[] = {"CPU", "GPU", "MEM", "CUDA_PROFILER", "RPD"};

const char* kind_of(const StepSpan& s) {
  if (s.num_draft_tokens > 0) return "verify";
  if (s.num_prefill_tokens == 0) return "decode";
  return s.num_decode_seqs == 0 ? "prefill" : "mixed";
}

}  // namespace

Status StepProfiler::start(const ProfileOptions& options) {
  for (const std::string& a : options.activities)
    if (std::find_if(std::begin(kActivities), std::end(kActivities), [&](const char* k) { return a == k; }) ==
        std::end(kActivities))
      return error("unknown profiling activity '", a, "' (expected CPU, GPU, MEM, CUDA_PROFILER or RPD)");
  if (options.num_steps < 0) return error("'num_steps' must be positive, got ", options.num_steps);
  std::string dir = options.output_dir;
  if (dir.empty()) {
    const char* env = std::getenv("SGLANG_TORCH_PROFILER_DIR");
    dir = env && *env ? env : "/tmp";
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return error("profile output directory '", dir, "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0) return error("profile output directory '", dir, "' is not writable");
  std::lock_guard<std::mutex> lock(mu_);
  if (on_) return error("Profiling is already in progress. Call /stop_profile first.");
  on_ = true;
  options_ = options;
  dir_ = dir;
  origin_ = Clock::now();
  wall_origin_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  planned_.clear();
  spans_.clear();
  return Status::ok();
}

Status StepProfiler::stop(std::string* path) {
  Trace t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_) return error("Profiling is not in progress. Call /start_profile first.");
    t = take_locked();
  }
  // Written outside the lock: the engine loop's hooks do not wait for the file.
  std::string file;
  DS_RETURN_IF_ERROR(write(t, &file));
  std::lock_guard<std::mutex> lock(mu_);
  last_path_ = file;
  if (path) *path = file;
  return Status::ok();
}

Status StepProfiler::stop(std::vector<std::string>* paths) {
  std::string path;
  DS_RETURN_IF_ERROR(stop(&path));
  if (paths) paths->push_back(path);
  return Status::ok();
}

bool StepProfiler::active() const { return on_.load(std::memory_order_relaxed); }

void StepProfiler::step_planned(uint64_t step_id) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (on_) planned_[step_id] = Clock::now();
}

void StepProfiler::step_completed(const StepSpan& span) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!on_) return;
  const Clock::time_point end = Clock::now();
  auto it = planned_.find(span.step_id);
  if (it == planned_.end()) return;  // planned before the start: no whole span
  spans_.push_back({span, it->second, end});
  planned_.erase(it);
  if (options_.num_steps > 0 && static_cast<int64_t>(spans_.size()) >= options_.num_steps) {
    std::string path;  // (num_steps bounds what this engine-thread write holds up)
    if (Status s = write(take_locked(), &path); !s.is_ok())
      DS_ERROR("profile: ", s.message());
    else
      last_path_ = path;
  }
}

std::string StepProfiler::last_path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_path_;
}

StepProfiler::Trace StepProfiler::take_locked() {
  on_ = false;
  Trace t;
  t.file = (std::filesystem::path(dir_) / (std::to_string(wall_origin_ms_) + "-" + options_.tag + ".trace.json"))
               .string();
  t.tag = options_.tag;
  t.origin = origin_;
  t.spans = std::move(spans_);
  spans_.clear();
  planned_.clear();
  return t;
}

// Chrome trace: one complete ("X") event a step, microseconds from the start. A step planned while the previous one
// is in flight overlaps it, and events on one track must nest: steps alternate between two tracks.
Status StepProfiler::write(const Trace& t, std::string* path) {
  std::ofstream out(t.file);
  const auto us = [&](Clock::time_point x) {
    return std::chrono::duration<double, std::micro>(x - t.origin).count();
  };
  out << "{\"traceEvents\": [\n";
  out << R"x(  {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "dserve engine )x" << t.tag
      << R"x( (host-side step spans)"}})x";
  char buf[512];
  for (const Span& sp : t.spans) {
    const StepSpan& s = sp.s;
    std::snprintf(buf, sizeof buf,
                  ",\n  {\"name\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                  "\"args\": {\"step\": %llu, \"seqs\": %d, \"tokens\": %d, \"decode_seqs\": %d, "
                  "\"prefill_tokens\": %d, \"draft_tokens\": %d}}",
                  kind_of(s), static_cast<int>(s.step_id % 2), us(sp.begin), us(sp.end) - us(sp.begin),
                  static_cast<unsigned long long>(s.step_id), s.num_seqs, s.num_tokens, s.num_decode_seqs,
                  s.num_prefill_tokens, s.num_draft_tokens);
    out << buf;
  }
  out << "\n], \"displayTimeUnit\": \"ms\"}\n";
  out.close();
  if (!out) return error("cannot write the profile '", t.file, "'");
  if (path) *path = t.file;
  DS_INFO("profile: ", t.spans.size(), " steps written to ", t.file);
  return Status::ok();
}

}  // namespace ds
