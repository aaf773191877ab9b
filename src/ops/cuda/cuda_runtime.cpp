// CUDA device selection, the compute stream, the stream-ordered allocator and tensor copies.
#include "ops/cuda/cuda_runtime.h"

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/env.h"
#include "core/stream_arena.h"
#include "kernels/basic.h"

namespace ds {
namespace {

// One GPU's state: its compute and side streams. Several GPUs serve one process when its tensor-parallel ranks are
// threads: each thread binds one (bind_cuda_device), and its streams, allocations and graph regions are that GPU's.
// Never destroyed: tensors held by static objects may be freed on a device's stream during exit.
struct DeviceState {
  std::atomic<bool> ready{false};
  cudaStream_t stream = nullptr;
  cudaStream_t side_stream = nullptr;
  std::once_flag side_once;
};
constexpr int kMaxDevices = 64;
DeviceState* g_devices = new DeviceState[kMaxDevices];
std::atomic<int> g_default_device{-1};  // the first device initialised: threads that bound none use it
std::atomic<int> g_num_devices{0};      // devices initialised
thread_local int t_device = -1;         // the device this thread bound (bind_cuda_device); -1: the default
thread_local cudaStream_t t_current = nullptr;  // null: the device's compute stream
std::atomic<bool> g_poison{false};

// The graph regions (begin_graph_alloc): the newest takes new blocks; older ones stay for the graphs captured on
// them and for frees of their blocks. Never returned to the driver (graphs live as long as the process's engine),
// and never destroyed: tensors held by static objects may be freed during exit.
struct GraphRegion {
  char* base = nullptr;
  size_t bytes = 0;
  std::unique_ptr<StreamArena> arena;
};
std::mutex& g_region_mu = *new std::mutex;
std::vector<GraphRegion>* g_regions_of = new std::vector<GraphRegion>[kMaxDevices];  // by device
thread_local bool t_graph_alloc = false;
thread_local int64_t t_graph_fallbacks = 0;
// The placement this thread's allocations would take in an empty, unbounded arena (offsets only, keyed by the
// real addresses): begin_graph_alloc_measure's warm-up and every graph allocation scope, whose own sequence tells
// the size a retry needs.
struct AllocShadow {
  StreamArena arena{SIZE_MAX / 4};
  std::unordered_map<void*, size_t> offsets;
};
thread_local AllocShadow* t_shadow = nullptr;  // owned; a plain pointer so thread exit destroys nothing

// A new shadow for this thread (replacing any), and what the one running needs, ending it.
void start_shadow() {
  delete t_shadow;
  t_shadow = new AllocShadow;
}
size_t end_shadow() {
  const size_t need = t_shadow ? t_shadow->arena.high_water() : 0;
  delete t_shadow;
  t_shadow = nullptr;
  return need;
}

// The device's highest stream priority, or its lowest (every stream's default) (DSERVE_STREAM_PRIORITY).
int stream_priority(bool highest) {
  int least = 0, greatest = 0;
  DS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return highest ? greatest : least;
}

// The device this thread runs on: the one it bound, else the first initialised.
int thread_device() {
  const int d = t_device >= 0 ? t_device : g_default_device.load(std::memory_order_acquire);
  DS_CHECK(d >= 0, "CUDA used before init_cuda_device");
  return d;
}

// Makes `d` the CUDA runtime's current device on this thread (cudaSetDevice only when it changes).
void make_current(int d) {
  thread_local int current = -1;
  if (current != d) {
    DS_CUDA_CHECK(cudaSetDevice(d));
    current = d;
  }
}

std::vector<GraphRegion>& regions() { return g_regions_of[thread_device()]; }

uint64_t stream_key(cudaStream_t s) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s)); }

void* device_alloc(size_t n) {
  void* p = nullptr;
  cudaStream_t s = cuda_stream();
  if (t_graph_alloc) {
    std::lock_guard<std::mutex> lock(g_region_mu);
    GraphRegion& r = regions().back();
    if (const auto off = r.arena->alloc(n, stream_key(s))) p = r.base + *off;
  }
  if (!p) {
    if (t_graph_alloc) ++t_graph_fallbacks;
    DS_CUDA_CHECK(cudaMallocAsync(&p, n, s));
  }
  if (t_shadow) t_shadow->offsets[p] = *t_shadow->arena.alloc(n, stream_key(s));
  if (g_poison.load(std::memory_order_relaxed)) DS_CUDA_CHECK(kernels::launch_fill_u16(p, n / 2, 0xFFFEu, s));
  return p;
}

// Frees p, a block of device d, on stream s of d (a graph-region block back to its arena).
void free_on(int d, void* p, cudaStream_t s) {
  {
    std::lock_guard<std::mutex> lock(g_region_mu);
    for (GraphRegion& r : g_regions_of[d])
      if (static_cast<char*>(p) >= r.base && static_cast<char*>(p) < r.base + r.bytes) {
        DS_CHECK(r.arena->free(static_cast<size_t>(static_cast<char*>(p) - r.base), stream_key(s)),
                 "free of a graph-region address that is not a live block");
        return;
      }
  }
  cudaFreeAsync(p, s);
}

void device_free(void* p) {
  const int d = thread_device();
  if (g_num_devices.load(std::memory_order_relaxed) > 1) {
    // Several GPUs: a block of another one (a rank's tensors dropped by the thread tearing the engine down) is freed
    // on its own device's compute stream.
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
    } else if (a.device != d && a.device >= 0 && a.device < kMaxDevices &&
               g_devices[a.device].ready.load(std::memory_order_acquire)) {
      make_current(a.device);
      free_on(a.device, p, g_devices[a.device].stream);
      make_current(d);
      return;
    }
  }
  cudaStream_t s = cuda_stream();
  if (t_shadow)
    if (auto it = t_shadow->offsets.find(p); it != t_shadow->offsets.end()) {
      t_shadow->arena.free(it->second, stream_key(s));
      t_shadow->offsets.erase(it);
    }
  free_on(d, p, s);
}

}  // namespace

Status check_cuda_device(int device_index) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return error("--device cuda: no usable CUDA device (", cudaGetErrorString(e), ")");
  if (device_index < 0 || device_index >= count)
    return error("--device cuda: GPU ", device_index, " does not exist (", count, " visible)");
  return Status::ok();
}

void init_cuda_device(int device_index) {
  DS_CHECK(device_index >= 0 && device_index < kMaxDevices, "CUDA device index ", device_index, " out of range");
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  DeviceState& st = g_devices[device_index];
  if (!st.ready.load(std::memory_order_acquire)) {
    make_current(device_index);
    DS_CUDA_CHECK(cudaStreamCreateWithPriority(&st.stream, cudaStreamDefault,
                                               stream_priority(cuda_stream_priority_mode() == 1)));
    cudaMemPool_t pool;
    DS_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_index));
    uint64_t keep = UINT64_MAX;  // keep freed blocks in the pool instead of returning them at every sync
    DS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    st.ready.store(true, std::memory_order_release);
    g_num_devices.fetch_add(1);
    int none = -1;
    if (g_default_device.compare_exchange_strong(none, device_index))
      set_device_allocator(Device::kCuda, DeviceAllocator{device_alloc, device_free});
  }
  bind_cuda_device(device_index);
}

void bind_cuda_device(int device_index) {
  DS_CHECK(device_index >= 0 && device_index < kMaxDevices &&
               g_devices[device_index].ready.load(std::memory_order_acquire),
           "bind_cuda_device(", device_index, ") before init_cuda_device(", device_index, ")");
  if (t_device != device_index) t_current = nullptr;  // a side section does not outlive a change of device
  t_device = device_index;
  make_current(device_index);
}

int cuda_device() { return thread_device(); }

cudaStream_t cuda_stream() {
  const int d = thread_device();
  make_current(d);
  return t_current ? t_current : g_devices[d].stream;
}

cudaStream_t cuda_main_stream() {
  const int d = thread_device();
  make_current(d);
  return g_devices[d].stream;
}

cudaStream_t cuda_side_stream() {
  const int d = thread_device();
  make_current(d);
  DeviceState& st = g_devices[d];
  std::call_once(st.side_once, [&st] {
    DS_CUDA_CHECK(cudaStreamCreateWithPriority(&st.side_stream, cudaStreamNonBlocking,
                                               stream_priority(cuda_stream_priority_mode() == 2)));
  });
  return st.side_stream;
}

int cuda_stream_priority_mode() {
  static const int mode = static_cast<int>(env_int("DSERVE_STREAM_PRIORITY", 1));
  return mode;
}

unsigned long long cuda_graph_instantiate_flags() {
  return cuda_stream_priority_mode() != 0 ? cudaGraphInstantiateFlagUseNodePriority : 0;
}

void set_current_cuda_stream(cudaStream_t s) { t_current = s == cuda_main_stream() ? nullptr : s; }

void set_cuda_alloc_poison(bool on) { g_poison.store(on); }

bool graph_arena_enabled() { return env_flag("DSERVE_GRAPH_ARENA", true); }

void begin_graph_alloc_measure() { start_shadow(); }

size_t end_graph_alloc_measure() {
  DS_CHECK(t_shadow, "end_graph_alloc_measure without begin_graph_alloc_measure");
  return end_shadow();
}

void begin_graph_alloc(size_t bytes, bool fresh_region) {
  DS_CHECK(!t_graph_alloc, "nested begin_graph_alloc");
  cuda_stream();  // the device current on this thread
  start_shadow();
  std::lock_guard<std::mutex> lock(g_region_mu);
  std::vector<GraphRegion>& regs = regions();
  if (fresh_region || regs.empty() || regs.back().bytes < bytes) {
    GraphRegion r;
    r.bytes = std::max<size_t>(StreamArena::round_up(bytes), StreamArena::kAlign);
    DS_CUDA_CHECK(cudaMalloc(&r.base, r.bytes));
    r.arena = std::make_unique<StreamArena>(r.bytes);
    regs.push_back(std::move(r));
  }
  regs.back().arena->release_tags();  // graphs launch one at a time: nothing of an earlier capture is in flight
  t_graph_alloc = true;
  t_graph_fallbacks = 0;
}

GraphAllocStats end_graph_alloc() {
  DS_CHECK(t_graph_alloc, "end_graph_alloc without begin_graph_alloc");
  t_graph_alloc = false;
  std::lock_guard<std::mutex> lock(g_region_mu);
  GraphRegion& r = regions().back();
  r.arena->release_tags();
  GraphAllocStats st;
  st.fallbacks = t_graph_fallbacks;
  st.needed = end_shadow();
  st.region_bytes = r.bytes;
  st.region_base = r.base;
  return st;
}

namespace {
std::mutex g_pinned_mu;
std::vector<PinnedSlot> g_pinned_free;  // never returned to the driver: a few small buffers per process
}  // namespace

PinnedSlot acquire_pinned(size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  const int device = cuda_device();  // the slot's event is recorded on this device's streams
  {
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    for (size_t i = 0; i < g_pinned_free.size(); ++i)
      if (g_pinned_free[i].bytes >= bytes && g_pinned_free[i].device == device) {
        PinnedSlot s = g_pinned_free[i];
        g_pinned_free.erase(g_pinned_free.begin() + static_cast<std::ptrdiff_t>(i));
        return s;
      }
  }
  cuda_stream();  // the device current on this thread
  PinnedSlot s;
  s.bytes = (bytes + 4095) / 4096 * 4096;
  s.device = device;
  DS_CUDA_CHECK(cudaHostAlloc(&s.host, s.bytes, cudaHostAllocPortable));
  DS_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  return s;
}

void release_pinned(PinnedSlot slot) {
  if (!slot.host) return;
  std::lock_guard<std::mutex> lock(g_pinned_mu);
  g_pinned_free.push_back(slot);
}

Tensor cuda_upload(const Tensor& host) {
  DS_CHECK(host.device() == Device::kCpu, "cuda_upload of ", host.describe());
  Tensor t = Tensor::empty(host.shape(), host.dtype(), Device::kCuda);
  if (host.nbytes())
    DS_CUDA_CHECK(cudaMemcpyAsync(t.data(), host.data(), host.nbytes(), cudaMemcpyHostToDevice, cuda_stream()));
  return t;
}

Tensor cuda_download(const Tensor& dev) {
  DS_CHECK(dev.device() == Device::kCuda, "cuda_download of ", dev.describe());
  Tensor t = Tensor::empty(dev.shape(), dev.dtype(), Device::kCpu);
  cudaStream_t s = cuda_stream();
  if (dev.nbytes()) DS_CUDA_CHECK(cudaMemcpyAsync(t.data(), dev.data(), dev.nbytes(), cudaMemcpyDeviceToHost, s));
  DS_CUDA_CHECK(cudaStreamSynchronize(s));
  return t;
}

}  // namespace ds
