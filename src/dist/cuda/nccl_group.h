// NcclGroup: a tensor-parallel group of GPUs driven by threads of this process (one rank a GPU), its all-reduce
// NCCL's, queued on each rank's compute stream (so CUDA graphs capture it). NCCL is loaded when a group is made
// (libnccl.so.2), so a single-GPU server needs no NCCL.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/collective.h"

namespace ds {

class NcclGroup {
 public:
  // Rank r on GPU devices[r] (each initialised with init_cuda_device first). An error names what failed: NCCL not
  // found, a device twice, the communicators' creation.
  static Result<std::shared_ptr<NcclGroup>> create(const std::vector<int>& devices);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const;
  // Rank r's handle (Ops::set_collective of the rank's CUDA backend); its all-reduce runs on the calling thread's
  // compute stream, which must be rank r's GPU. BF16, F16, F32 and I32 tensors; every rank's result is the same bits.
  std::shared_ptr<Collective> member(int rank);
  // A rank failed mid-step: aborts every communicator (ranks whose kernels wait in a collective for it are released)
  // and every later all-reduce throws std::runtime_error naming `why`. The group stays broken.
  void abort(const std::string& why);
  // NCCL's version (e.g. 22803), for logs.
  int version() const;

 private:
  struct State;
  class Member;
  explicit NcclGroup(std::shared_ptr<State> s);
  std::shared_ptr<State> state_;
};

}  // namespace ds
