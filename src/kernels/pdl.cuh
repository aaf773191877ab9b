// Programmatic dependent launch (sm_90): a kernel launched with launch_pdl may be scheduled while the kernel
// before it in the stream is still running, so its launch latency and prologue (weight prefetch) overlap that
// kernel's tail instead of following it. In graphs this turns a decode step's ~500 kernel boundaries from
// "drain, launch, ramp up" into overlapped ones.
//
// The contract for a kernel launched this way: pdl_wait() before it reads anything an earlier kernel wrote and before
// its first global write (a buffer it writes may still be read by the previous kernel). Only data no kernel writes
// during a forward (weights) may be touched before; a kernel may also read, and say so where it does, the step metadata
// the host uploads before the forward, cache rows older than the step's new tokens (mla_decode_t16.cu prefetches such
// tiles) and outputs of kernels at least two launches back in the stream (the launch in between passed its own
// pdl_wait, so they had completed, before it let this one start; the MoE combine's ids, the down GEMMs' slot records,
// the FP8 gate|up's behind a quantization launch; not across mla_decode.cu's split combine, which lets its successor
// start before its own wait unless DSERVE_MLA_COMBINE_EARLY=0): a forward that computes metadata or rewrites old rows
// on the device, or reorders those launches, must revisit those kernels. pdl_wait returns once every earlier kernel of
// the stream has completed and its writes are visible, so chains of such kernels stay ordered. Launched without the
// attribute (DSERVE_PDL=0), both device calls are no-ops.
#pragma once
#include <cstdint>
#include <utility>

#include <cuda_runtime.h>

namespace ds::kernels {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the next PDL kernel of the stream be scheduled once every CTA of this one has called it (or exited);
// called right after pdl_wait, so at most one kernel ahead is resident and waiting.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Both, at the top of a kernel with nothing to do before its inputs are ready.
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_launch_dependents();
}

// DSERVE_PDL=0 launches without the attribute (A/B runs); read once per process.
bool pdl_enabled();
// Early triggers: a kernel that calls pdl_launch_dependents at its entry, before its own wait, lets the next launch
// of the stream start its pre-wait prologue (weights staged into shared memory or registers) while this kernel
// waits and works, two launches ahead. Safe where that next launch reads nothing a forward writes before its wait:
// the "two launches back" reads above are then not covered for it. Three launchers offer it: the attention's q /
// kv_a pair (next: the absorbed-MLA prep, or V3's q_a norm), and the one-row norms that quantize for FP8 linears,
// plain and MoE-summing (next: the router or a dense gate|up, the next layer's pair). The activation quantizations
// before FP8 small-M GEMMs and the FP8 MoE down offered it too and lost 6% at FP8 batch 1 (H200, session 35:
// 1.76-1.79 vs 1.66-1.68 ms; removed). DSERVE_PDL_EARLY (read per
// launch): unset = auto_default, each launcher's measured choice (FP8 decode at one token: H200, session 34,
// V2-Lite --quantization fp8 batch 1 1.66-1.69 vs 1.70-1.73 ms over three calls; batch 8 and bf16 lost), 0 off, 1
// on for every launch that offers it (tests: FixtureGpuTest.EarlyTriggersMatchTheDefaultSchedule).
bool pdl_early(bool auto_default);
// SMs of the device current at the first call (cached: launch shapes are chosen per launch), for launchers that
// size their grids by it; 132 when the query fails.
int device_sm_count();
// pdl_fence (basic.h) marks a stream whose next launch must be plain; true once per fence.
bool pdl_take_fence(cudaStream_t stream);

// Measurement only: DSERVE_DUP_KERNELS=a,b,... (read once) launches every kernel whose (mangled) name contains one
// of the substrings twice, back to back with the same arguments, so the step-time difference is that kernel's
// marginal cost inside the real chain (PDL overlap included). Results of kernels that accumulate become wrong;
// bench timings with dummy weights stay meaningful. False for every kernel when unset.
bool launch_twice(const void* kernel);

// cluster: thread-block cluster dimensions (a cluster launch when not 1 x 1 x 1; the grid must be a multiple).
template <typename... Params, typename... Args>
cudaError_t launch_pdl_cluster(void (*kernel)(Params...), dim3 grid, dim3 cluster, dim3 block, size_t smem,
                               cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() && !pdl_take_fence(stream) ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = cluster.x;
    attr[1].val.clusterDim.y = cluster.y;
    attr[1].val.clusterDim.z = cluster.z;
    cfg.numAttrs = 2;
  }
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
  if (e == cudaSuccess && launch_twice(reinterpret_cast<const void*>(kernel)))
    e = cudaLaunchKernelEx(&cfg, kernel, args...);
  return e;
}

// A plain launch (no PDL attribute: for kernels that read their inputs without griddepcontrol.wait) returning its own
// error. A <<<>>> launch followed by cudaGetLastError() would report an earlier unrelated failure of this thread (one
// some other call left unread) as the launch's.
template <typename... Params, typename... Args>
cudaError_t launch_plain(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                         Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                       Args&&... args) {
  return launch_pdl_cluster(kernel, grid, dim3(1, 1, 1), block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace ds::kernels
