// In-process all-reduce: each rank posts its tensor, all wait; each sums the posted tensors in rank order into a
// buffer of its own; all wait again (nobody overwrites a tensor another rank still reads); each copies its sum in.
#include "dist/local_group.h"

#include <algorithm>

#include "core/check.h"

namespace ds {

struct LocalGroup::State {
  explicit State(int n) : posted(static_cast<size_t>(n), nullptr), sync(n) {}
  std::vector<const Tensor*> posted;
  std::barrier<> sync;
};

class LocalGroup::Member final : public Collective {
 public:
  Member(std::shared_ptr<State> s, int rank, int size) : s_(std::move(s)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(Tensor& t) override {
    DS_CHECK(t.device() == Device::kCpu && t.dtype() == DType::kF32, "LocalGroup all-reduce of ", t.describe(),
             " (F32 CPU tensors only)");
    s_->posted[rank_] = &t;
    s_->sync.arrive_and_wait();
    const int64_t n = t.numel();
    sum_.assign(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < size_; ++r) {
      const Tensor* o = s_->posted[r];
      DS_CHECK(o->numel() == n && o->dtype() == DType::kF32, "all-reduce: rank ", r, " posted ", o->describe(),
               ", rank ", rank_, " ", t.describe());
      const float* p = o->f32();
      for (int64_t i = 0; i < n; ++i) sum_[i] += p[i];
    }
    s_->sync.arrive_and_wait();
    std::copy(sum_.begin(), sum_.end(), t.f32());
  }

 private:
  std::shared_ptr<State> s_;
  int rank_, size_;
  std::vector<float> sum_;
};

LocalGroup::LocalGroup(int size) : size_(size) {
  DS_CHECK(size >= 1, "a group of ", size, " ranks");
  state_ = std::make_shared<State>(size);
}

std::shared_ptr<Collective> LocalGroup::member(int rank) {
  DS_CHECK(rank >= 0 && rank < size_, "rank ", rank, " of a group of ", size_);
  return std::make_shared<Member>(state_, rank, size_);
}

}  // namespace ds
