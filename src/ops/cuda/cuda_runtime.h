// CUDA runtime plumbing for the CUDA backend: error checks with context, the process-wide compute stream,
// and the stream-ordered device allocator (cudaMallocAsync) that core/tensor.h uses for Device::kCuda.
#pragma once
#include <string>

#include <cuda_runtime.h>

#include "core/check.h"
#include "core/status.h"
#include "core/tensor.h"

#define DS_CUDA_CHECK(expr)                                                                   \
  do {                                                                                        \
    cudaError_t ds_err_ = (expr);                                                             \
    DS_CHECK(ds_err_ == cudaSuccess, #expr, ": ", cudaGetErrorString(ds_err_));               \
  } while (0)

namespace ds {

// An error naming the problem when `device_index` cannot be used (no driver, no such GPU).
Status check_cuda_device(int device_index);

// Creates `device_index`'s compute stream (once; freed memory stays in its pool) and binds the calling thread to
// it. The first device initialised is every unbound thread's; the Device::kCuda allocator (cudaMallocAsync /
// cudaFreeAsync) serves each thread on its bound device. Several devices: tensor-parallel ranks as threads.
void init_cuda_device(int device_index);
// Binds the calling thread to an initialised device: its CUDA work, allocations and graph regions go there from now
// on (a rank's thread binds its GPU before running the rank's model: Ops::bind_thread).
void bind_cuda_device(int device_index);
// The device the calling thread runs on (bound, else the first initialised).
int cuda_device();

// The stream CUDA ops run on: the thread's device's compute stream (a blocking stream, so legacy-default-stream
// work orders with it), or the side stream inside a side section (Ops::side_begin). Also makes the device current
// on the calling thread (the engine runs the model on its own thread).
cudaStream_t cuda_stream();
// The compute stream itself and the side stream (made on first use; non-blocking), whatever is current.
cudaStream_t cuda_main_stream();
cudaStream_t cuda_side_stream();
// DSERVE_STREAM_PRIORITY (read once, when the stream is made): 1 makes the main stream the device's highest
// priority, 2 the side stream, 0 neither, so that when both streams' kernels wait for room on the SMs (the routed
// experts' chain on the main stream, the shared expert on the side) the block scheduler places the favoured
// stream's CTAs first. Graph kernel nodes copy the capturing stream's priority, and graphs then run with their
// nodes' priorities (cudaGraphInstantiateFlagUseNodePriority: cuda_graph_instantiate_flags()). With the join fenced
// both lost (session 28); with the join launched with PDL too, main first won at FP8 batch 1 (session 30, H200
// V2-Lite: 1.71-1.72 ms vs 1.74-1.75 with neither; batch 8 the same) and tied at bf16 (session 31: 2.15 / 2.17 vs
// 2.15 / 2.15 ms at batch 1, 5.76 / 5.80 vs 5.82 / 5.78 at batch 8), so unset the mode is 1 for every model.
int cuda_stream_priority_mode();
unsigned long long cuda_graph_instantiate_flags();
// Makes `s` (nullptr: the compute stream) current on this thread. Allocations and frees follow the current
// stream (stream-ordered), so a tensor made in a side section may die in it; one made before it must not.
void set_current_cuda_stream(cudaStream_t s);

// CUDA-graph capture allocations (runner/cuda_graph_runner.cpp). Captured cudaMallocAsync / cudaFreeAsync calls
// become memory nodes of the graph, and a kernel whose predecessor in its stream is such a node gets a full edge
// instead of a programmatic one: it cannot start before that kernel ends (PDL, kernels/pdl.cuh; in a session-26
// trace 322 of 509 kernel boundaries of a decode step had a node between them, and none started early). Between
// begin_graph_alloc and end_graph_alloc this thread's device allocations are placed in a region kept for graphs
// (core/stream_arena.h: blocks reused only on the stream that freed them), which adds no node. A reused block's new
// writer is then ordered after its last reader by the PDL contract (kernels/pdl.cuh: no global write before
// pdl_wait, and pdl_wait returns once every earlier kernel of the stream has completed), not by a full edge.
// Measuring first: between begin_graph_alloc_measure() and end_graph_alloc_measure() (the eager warm-up of the same
// forward) allocations are also placed in a shadow arena; the result is the bytes that sequence needs.
void begin_graph_alloc_measure();
size_t end_graph_alloc_measure();
// Makes the graph region at least `bytes` (cudaMalloc, outside the capture; a region outgrown stays for the graphs
// captured on it), or a new one of `bytes` with fresh_region, and routes this thread's allocations to it.
void begin_graph_alloc(size_t bytes, bool fresh_region = false);
struct GraphAllocStats {
  int64_t fallbacks = 0;    // allocations that did not fit (cudaMallocAsync: a memory node each)
  size_t needed = 0;        // what this scope's allocations need from an empty region (a retry's size)
  size_t region_bytes = 0;  // the region this scope used
  void* region_base = nullptr;  // and where it starts
};
GraphAllocStats end_graph_alloc();
// The graph runner's capture allocations go to the arena unless DSERVE_GRAPH_ARENA=0 (read per call). On since
// session 28: V2-Lite batch 1 decode 2.33 -> 2.15 ms bf16, 2.07 -> 1.81 ms FP8 on the H200 (BENCHMARKS.md).
bool graph_arena_enabled();

// Tests: fill every new allocation with 0xFFFE halves (NaN as bf16 and fp32, -65538 as int32), so an op
// that leaves part of its output unwritten is caught.
void set_cuda_alloc_poison(bool on);

// A page-locked host buffer and an event, reused across calls: a device-to-host copy queued behind a step's
// kernels lands here, and the host waits for `done` only when it needs the bytes (overlap scheduling).
struct PinnedSlot {
  void* host = nullptr;
  size_t bytes = 0;
  cudaEvent_t done = nullptr;
  int device = 0;  // the GPU whose streams record `done`
};
// A slot of at least `bytes` (from the free list, else newly allocated); thread-safe.
PinnedSlot acquire_pinned(size_t bytes);
// Back to the free list; the caller has waited for `done` (or never recorded it).
void release_pinned(PinnedSlot slot);

// Host <-> device copies of whole tensors (same dtype and shape), ordered on cuda_stream(); the download
// waits for the stream.
Tensor cuda_upload(const Tensor& host);
Tensor cuda_download(const Tensor& dev);

}  // namespace ds
