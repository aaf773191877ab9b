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

int g_device = -1;
cudaStream_t g_stream = nullptr;
cudaStream_t g_side_stream = nullptr;
thread_local cudaStream_t t_current = nullptr;  // null: g_stream
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
std::vector<GraphRegion>& g_regions = *new std::vector<GraphRegion>;
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

uint64_t stream_key(cudaStream_t s) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s)); }

void* device_alloc(size_t n) {
  void* p = nullptr;
  cudaStream_t s = cuda_stream();
  if (t_graph_alloc) {
    std::lock_guard<std::mutex> lock(g_region_mu);
    GraphRegion& r = g_regions.back();
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

void device_free(void* p) {
  cudaStream_t s = t_current ? t_current : g_stream;
  if (t_shadow)
    if (auto it = t_shadow->offsets.find(p); it != t_shadow->offsets.end()) {
      t_shadow->arena.free(it->second, stream_key(s));
      t_shadow->offsets.erase(it);
    }
  {
    std::lock_guard<std::mutex> lock(g_region_mu);
    for (GraphRegion& r : g_regions)
      if (static_cast<char*>(p) >= r.base && static_cast<char*>(p) < r.base + r.bytes) {
        DS_CHECK(r.arena->free(static_cast<size_t>(static_cast<char*>(p) - r.base), stream_key(s)),
                 "free of a graph-region address that is not a live block");
        return;
      }
  }
  cudaFreeAsync(p, s);
}

void make_current() {
  thread_local int current = -1;
  if (current != g_device) {
    DS_CUDA_CHECK(cudaSetDevice(g_device));
    current = g_device;
  }
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
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (g_device >= 0) {
    DS_CHECK(g_device == device_index, "CUDA already initialised on device ", g_device, ", asked for ", device_index);
    return;
  }
  DS_CUDA_CHECK(cudaSetDevice(device_index));
  g_device = device_index;
  // Never destroyed: tensors held by static objects may be freed on it during exit.
  DS_CUDA_CHECK(
      cudaStreamCreateWithPriority(&g_stream, cudaStreamDefault, stream_priority(cuda_stream_priority_mode() == 1)));
  cudaMemPool_t pool;
  DS_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_index));
  uint64_t keep = UINT64_MAX;  // keep freed blocks in the pool instead of returning them at every sync
  DS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  set_device_allocator(Device::kCuda, DeviceAllocator{device_alloc, device_free});
}

cudaStream_t cuda_stream() {
  DS_CHECK(g_device >= 0, "CUDA used before init_cuda_device");
  make_current();
  return t_current ? t_current : g_stream;
}

cudaStream_t cuda_main_stream() {
  DS_CHECK(g_device >= 0, "CUDA used before init_cuda_device");
  make_current();
  return g_stream;
}

cudaStream_t cuda_side_stream() {
  static std::once_flag once;
  cudaStream_t main = cuda_main_stream();
  (void)main;
  std::call_once(once, [] {
    DS_CUDA_CHECK(cudaStreamCreateWithPriority(&g_side_stream, cudaStreamNonBlocking,
                                               stream_priority(cuda_stream_priority_mode() == 2)));
  });
  return g_side_stream;
}

int cuda_stream_priority_mode() {
  static const int mode = static_cast<int>(env_int("DSERVE_STREAM_PRIORITY", 1));
  return mode;
}

unsigned long long cuda_graph_instantiate_flags() {
  return cuda_stream_priority_mode() != 0 ? cudaGraphInstantiateFlagUseNodePriority : 0;
}

void set_current_cuda_stream(cudaStream_t s) { t_current = s == g_stream ? nullptr : s; }

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
  if (fresh_region || g_regions.empty() || g_regions.back().bytes < bytes) {
    GraphRegion r;
    r.bytes = std::max<size_t>(StreamArena::round_up(bytes), StreamArena::kAlign);
    DS_CUDA_CHECK(cudaMalloc(&r.base, r.bytes));
    r.arena = std::make_unique<StreamArena>(r.bytes);
    g_regions.push_back(std::move(r));
  }
  g_regions.back().arena->release_tags();  // graphs launch one at a time: nothing of an earlier capture is in flight
  t_graph_alloc = true;
  t_graph_fallbacks = 0;
}

GraphAllocStats end_graph_alloc() {
  DS_CHECK(t_graph_alloc, "end_graph_alloc without begin_graph_alloc");
  t_graph_alloc = false;
  std::lock_guard<std::mutex> lock(g_region_mu);
  GraphRegion& r = g_regions.back();
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
  {
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    for (size_t i = 0; i < g_pinned_free.size(); ++i)
      if (g_pinned_free[i].bytes >= bytes) {
        PinnedSlot s = g_pinned_free[i];
        g_pinned_free.erase(g_pinned_free.begin() + static_cast<std::ptrdiff_t>(i));
        return s;
      }
  }
  PinnedSlot s;
  s.bytes = (bytes + 4095) / 4096 * 4096;
  DS_CUDA_CHECK(cudaHostAlloc(&s.host, s.bytes, cudaHostAllocDefault));
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
