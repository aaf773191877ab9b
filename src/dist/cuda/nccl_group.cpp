// NCCL through dlopen: the few entry points a group needs, resolved once. One communicator a rank
// (ncclCommInitAll), each guarded by a mutex that abort takes too, so that no all-reduce is being queued on a
// communicator while abort frees it.
#include "dist/cuda/nccl_group.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <stdexcept>

#include <nccl.h>

#include "core/check.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

struct NcclApi {
  void* lib = nullptr;
  ncclResult_t (*get_version)(int*) = nullptr;
  ncclResult_t (*comm_init_all)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  const char* (*error_string)(ncclResult_t) = nullptr;
  std::string error;  // why loading failed
};

template <class F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

const NcclApi& nccl() {
  static const NcclApi api = [] {
    NcclApi a;
    a.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!a.lib) {
      const char* e = dlerror();
      a.error = std::string("cannot load libnccl.so.2 (") + (e ? e : "?") + ")";
      return a;
    }
    if (!resolve(a.lib, "ncclGetVersion", &a.get_version) || !resolve(a.lib, "ncclCommInitAll", &a.comm_init_all) ||
        !resolve(a.lib, "ncclCommDestroy", &a.comm_destroy) || !resolve(a.lib, "ncclCommAbort", &a.comm_abort) ||
        !resolve(a.lib, "ncclAllReduce", &a.all_reduce) || !resolve(a.lib, "ncclGetErrorString", &a.error_string))
      a.error = "libnccl.so.2 lacks an entry point dserve needs (NCCL 2.18 or newer)";
    return a;
  }();
  return api;
}

std::string nccl_error(ncclResult_t r) {
  const NcclApi& a = nccl();
  return a.error_string ? a.error_string(r) : "NCCL error " + std::to_string(static_cast<int>(r));
}

}  // namespace

struct NcclGroup::State {
  std::vector<int> devices;
  std::vector<ncclComm_t> comms;
  std::vector<std::unique_ptr<std::mutex>> mu;  // one a rank: queuing an all-reduce vs abort
  std::atomic<bool> broken{false};
  std::mutex why_mu;
  std::string why;

  // The last member (or the group handle) gone: the communicators with it (an aborted one is already freed).
  ~State() {
    for (ncclComm_t c : comms)
      if (c) nccl().comm_destroy(c);
  }

  std::string broken_why() {
    std::lock_guard<std::mutex> lock(why_mu);
    return why;
  }
};

class NcclGroup::Member final : public Collective {
 public:
  Member(std::shared_ptr<State> s, int rank) : s_(std::move(s)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(s_->devices.size()); }
  void all_reduce_sum(Tensor& t) override {
    DS_CHECK(t.device() == Device::kCuda, "NCCL all-reduce of ", t.describe(), " (CUDA tensors only)");
    ncclDataType_t type = ncclFloat32;
    switch (t.dtype()) {
      case DType::kBF16: type = ncclBfloat16; break;
      case DType::kF16: type = ncclFloat16; break;
      case DType::kF32: type = ncclFloat32; break;
      case DType::kI32: type = ncclInt32; break;
      default: DS_CHECK(false, "NCCL all-reduce of ", t.describe(), ": BF16, F16, F32 or I32 only");
    }
    DS_CHECK(cuda_device() == s_->devices[rank_], "NCCL rank ", rank_, " (GPU ", s_->devices[rank_],
             ") all-reduce on a thread bound to GPU ", cuda_device());
    std::lock_guard<std::mutex> lock(*s_->mu[rank_]);
    if (s_->broken.load()) throw std::runtime_error("tensor-parallel group aborted: " + s_->broken_why());
    if (t.numel() == 0) return;
    const ncclResult_t r = nccl().all_reduce(t.data(), t.data(), static_cast<size_t>(t.numel()), type, ncclSum,
                                             s_->comms[rank_], cuda_stream());
    if (r != ncclSuccess) throw std::runtime_error("NCCL all-reduce on rank " + std::to_string(rank_) + ": " + nccl_error(r));
  }

 private:
  std::shared_ptr<State> s_;
  int rank_;
};

Result<std::shared_ptr<NcclGroup>> NcclGroup::create(const std::vector<int>& devices) {
  if (devices.empty()) return error("an NCCL group needs at least one GPU");
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (devices[i] == devices[j])
        return error("tensor-parallel ranks ", j, " and ", i, " are both on GPU ", devices[i],
                     " (NCCL needs one GPU a rank: check --base-gpu-id / --gpu-id-step and the visible GPUs)");
  const NcclApi& api = nccl();
  if (!api.error.empty()) return error("multi-GPU tensor parallelism needs NCCL: ", api.error);
  auto s = std::make_shared<State>();
  s->devices = devices;
  s->comms.assign(devices.size(), nullptr);
  for (size_t i = 0; i < devices.size(); ++i) s->mu.push_back(std::make_unique<std::mutex>());
  const int back = cuda_device();
  const ncclResult_t r = api.comm_init_all(s->comms.data(), static_cast<int>(devices.size()), devices.data());
  // NCCL switches this thread's device while it sets the ranks up: put back the one the runtime believes current.
  DS_CUDA_CHECK(cudaSetDevice(back));
  if (r != ncclSuccess) return error("NCCL could not set up ", devices.size(), " GPUs: ", nccl_error(r));
  return std::shared_ptr<NcclGroup>(new NcclGroup(std::move(s)));
}

NcclGroup::NcclGroup(std::shared_ptr<State> s) : state_(std::move(s)) {}

NcclGroup::~NcclGroup() = default;

int NcclGroup::size() const { return static_cast<int>(state_->devices.size()); }

std::shared_ptr<Collective> NcclGroup::member(int rank) {
  DS_CHECK(rank >= 0 && rank < size(), "NCCL rank ", rank, " of ", size());
  return std::make_shared<Member>(state_, rank);
}

void NcclGroup::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(state_->why_mu);
    if (state_->broken.load()) return;
    state_->why = why;
    state_->broken.store(true);
  }
  const NcclApi& api = nccl();
  for (size_t i = 0; i < state_->comms.size(); ++i) {
    std::lock_guard<std::mutex> lock(*state_->mu[i]);
    if (state_->comms[i]) api.comm_abort(state_->comms[i]);
    state_->comms[i] = nullptr;
  }
}

int NcclGroup::version() const {
  int v = 0;
  if (nccl().get_version) nccl().get_version(&v);
  return v;
}

}  // namespace ds
