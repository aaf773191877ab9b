// The other ranks' step loop: wait for a job, run it, report; the caller's rank 0 runs beside them.
#include "runner/tp_ranks.h"

#include <stdexcept>

namespace ds {

TpRanks::TpRanks(std::vector<BatchRunner*> others, std::function<void(const std::string&)> on_failure)
    : runners_(std::move(others)), on_failure_(std::move(on_failure)) {
  errors_.resize(runners_.size());
  for (size_t i = 0; i < runners_.size(); ++i) threads_.emplace_back([this, i] { worker(i); });
}

TpRanks::~TpRanks() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void TpRanks::worker(size_t i) {
  ScopedCheckThrows checks_throw;  // a broken invariant fails the step on the engine thread, not the process
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || job_ != seen; });
    if (stop_) return;
    seen = job_;
    const std::function<void(int)>& job = *job_fn_;
    lock.unlock();
    std::string err;
    try {
      job(static_cast<int>(i + 1));
    } catch (const std::exception& e) {
      err = e.what();
      if (on_failure_) on_failure_("rank " + std::to_string(i + 1) + ": " + err);
    }
    lock.lock();
    errors_[i] = std::move(err);
    ++done_;
    cv_.notify_all();
  }
}

void TpRanks::run_all(const std::function<void(int rank)>& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_fn_ = &job;
    done_ = 0;
    ++job_;
  }
  cv_.notify_all();
  std::string err0;
  try {
    job(0);
  } catch (const std::exception& e) {
    err0 = e.what();
    if (on_failure_) on_failure_("rank 0: " + err0);
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ == runners_.size(); });
  job_fn_ = nullptr;
  if (!err0.empty()) throw std::runtime_error("tensor-parallel rank 0: " + err0);
  for (size_t i = 0; i < runners_.size(); ++i)
    if (!errors_[i].empty()) throw std::runtime_error("tensor-parallel rank " + std::to_string(i + 1) + ": " + errors_[i]);
}

std::vector<SeqOutput> TpRanks::execute(BatchRunner& rank0, const StepPlan& plan,
                                        const std::unordered_map<std::string, RunnerRequestInfo>& info) {
  std::vector<std::vector<SeqOutput>> outputs(runners_.size() + 1);
  run_all([&](int r) { outputs[r] = (r == 0 ? rank0 : *runners_[r - 1]).execute(plan, info); });
  const std::vector<SeqOutput>& out = outputs[0];
  for (size_t i = 1; i < outputs.size(); ++i) {
    DS_CHECK(outputs[i].size() == out.size(), "tensor-parallel rank ", i, " returned ", outputs[i].size(),
             " outputs, rank 0 ", out.size());
    for (size_t s = 0; s < out.size(); ++s)
      DS_CHECK(outputs[i][s].token == out[s].token && outputs[i][s].accepted_drafts == out[s].accepted_drafts &&
                   outputs[i][s].next_drafts == out[s].next_drafts,
               "tensor-parallel rank ", i, " sampled other tokens than rank 0 for sequence ", s);
  }
  return std::move(outputs[0]);
}

void TpRanks::release(const std::string& rid) {
  std::lock_guard<std::mutex> lock(mu_);
  for (BatchRunner* r : runners_) r->release(rid);
}

}  // namespace ds
