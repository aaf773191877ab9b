// A grouping's ready word (MoePermuteParams::ready, MoeFp8GemmParams / MoeGroupedGemmParams::slots_ready): lets
// the expert GEMM that directly follows a fused routing launch read its slot record, and issue its first weight
// round, before its PDL wait (pdl.cuh allows that only for outputs two launches back).
// The routing launch clears the word after its own wait and before it lets its dependents start (so a dependent
// never sees a stale 1 from an earlier grouping that used the same memory), and sets it with release semantics
// once every slot record is written; a dependent CTA acquires it. A bounded wait: a dependent that does not see
// it in time takes the plain path (PDL wait, then the slot), so a missing set costs time, never correctness.
#pragma once
#include <cstdint>

namespace ds::kernels::slot_ready {

// One thread, after pdl_wait and before pdl_launch_dependents (with a block barrier between it and the trigger).
__device__ __forceinline__ void clear(int32_t* word) {
  *reinterpret_cast<volatile int32_t*>(word) = 0;
  __threadfence();  // the clear reaches L2 before the dependents can be scheduled
}

// One thread, after a block barrier that follows every slot record write of the block.
__device__ __forceinline__ void set(int32_t* word) {
  __threadfence();  // cumulative: the block's record writes, seen through the barrier, become visible first
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(word), "r"(1) : "memory");
#else
  *reinterpret_cast<volatile int32_t*>(word) = 1;
#endif
}

// Every thread of the block (a block barrier inside): true once thread 0 has acquired a set word (the slot records
// may then be read by every thread), false after ~kSpins polls without it.
__device__ __forceinline__ bool wait(const int32_t* word) {
  constexpr int kSpins = 1 << 14;  // ~16K polls of >= 64 ns: a few ms at most before the plain path
  int seen = 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSpins; ++i) {
      int32_t v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(word) : "memory");
#else
      v = *reinterpret_cast<const volatile int32_t*>(word);
#endif
      if (v != 0) {
        seen = 1;
        break;
      }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
      __nanosleep(64);
#endif
    }
  }
  return __syncthreads_or(seen) != 0;
}

// Whether a decode expert kernel may read its slot record before its PDL wait: the records settled (written two
// launches back, pdl.cuh) or its ready word (optional) set. Every thread of the block when `word` is given.
__device__ __forceinline__ bool early(bool settled, const int32_t* word) { return settled || (word && wait(word)); }

}  // namespace ds::kernels::slot_ready
