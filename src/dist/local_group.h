// LocalGroup: a tensor-parallel group of ranks that are threads of this process, each with its own CPU backend
// and model shard (the CPU reference of multi-GPU serving; NCCL groups for CUDA come next). All-reduce sums in
// rank order, so every rank gets the same bits.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/collective.h"

namespace ds {

class LocalGroup {
 public:
  explicit LocalGroup(int size);
  int size() const { return size_; }
  // Rank r's handle (give it to that rank's Ops::set_collective); every rank must join every collective.
  std::shared_ptr<Collective> member(int rank);
  // A rank failed mid-step: every collective waiting now or called later throws (std::runtime_error naming
  // `why`) instead of waiting for it forever. The group stays broken.
  void abort(const std::string& why);

  // The group's doorbell, so that idle ranks sleep instead of polling (data-parallel attention: a request that
  // reaches one rank must wake all of them, since every step is a collective): ring() after making work visible;
  // a rank reads rings() before it looks for work, and if it found none waits in wait_ring with that count, which
  // returns at once when a ring came in between (or after `timeout`, or when the group is aborted).
  void ring();
  uint64_t rings() const;
  void wait_ring(uint64_t seen, std::chrono::milliseconds timeout);

 private:
  class Member;
  struct State;
  int size_;
  std::shared_ptr<State> state_;
};

}  // namespace ds
