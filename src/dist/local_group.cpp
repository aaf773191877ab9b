// In-process all-reduce: each rank posts its tensor, all wait; each sums the posted tensors in rank order into a
// buffer of its own; all wait again (nobody overwrites a tensor another rank still reads); each copies its sum in.
// The waits are a generation barrier that abort() breaks.
#include "dist/local_group.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "core/check.h"

namespace ds {

struct LocalGroup::State {
  explicit State(int n) : size(n), posted(static_cast<size_t>(n), nullptr) {}
  const int size;
  std::vector<const Tensor*> posted;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
  std::string why;
  uint64_t rings = 0;  // the doorbell (guarded by mu, waited on with cv)

  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (aborted) throw std::runtime_error("tensor-parallel group aborted: " + why);
    const uint64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != gen || aborted; });
    if (generation == gen) throw std::runtime_error("tensor-parallel group aborted: " + why);
  }
};

class LocalGroup::Member final : public Collective {
 public:
  Member(std::shared_ptr<State> s, int rank) : s_(std::move(s)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }
  void all_reduce_sum(Tensor& t) override {
    DS_CHECK(t.device() == Device::kCpu && t.dtype() == DType::kF32, "LocalGroup all-reduce of ", t.describe(),
             " (F32 CPU tensors only)");
    s_->posted[rank_] = &t;
    s_->arrive_and_wait();
    const int64_t n = t.numel();
    sum_.assign(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < s_->size; ++r) {
      const Tensor* o = s_->posted[r];
      DS_CHECK(o->numel() == n && o->dtype() == DType::kF32, "all-reduce: rank ", r, " posted ", o->describe(),
               ", rank ", rank_, " ", t.describe());
      const float* p = o->f32();
      for (int64_t i = 0; i < n; ++i) sum_[i] += p[i];
    }
    s_->arrive_and_wait();
    std::copy(sum_.begin(), sum_.end(), t.f32());
  }

 private:
  std::shared_ptr<State> s_;
  int rank_;
  std::vector<float> sum_;
};

LocalGroup::LocalGroup(int size) : size_(size) {
  DS_CHECK(size >= 1, "a group of ", size, " ranks");
  state_ = std::make_shared<State>(size);
}

std::shared_ptr<Collective> LocalGroup::member(int rank) {
  DS_CHECK(rank >= 0 && rank < size_, "rank ", rank, " of a group of ", size_);
  return std::make_shared<Member>(state_, rank);
}

void LocalGroup::ring() {
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->rings;
  state_->cv.notify_all();
}

uint64_t LocalGroup::rings() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->rings;
}

void LocalGroup::wait_ring(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait_for(lock, timeout, [&] { return state_->rings != seen || state_->aborted; });
}

void LocalGroup::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->aborted) return;
  state_->aborted = true;
  state_->why = why;
  state_->cv.notify_all();
}

}  // namespace ds
