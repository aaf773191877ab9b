// The M = 1 weight stream of gemm_small_m.cu (batch-1 decode): one warp per weight row (gate and up row with the
// fused SiLU), the row read straight into registers, its first segment before the PDL wait.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels::gemv {

// Why (BENCHMARKS.md, "How far a decode weight stream can go"): a pure read with every load of a call in flight
// from registers reaches the after-wait floor (q_proj 5.7 us) where the shared-memory small-M kernel takes 7.9 us,
// and loads issued before the PDL wait overlap the previous kernel (3.8 us).
constexpr int kWarps = 8;

// The rows of one problem, or of a pair sharing K, for the warp loop: item i < split is row i of w[0], the rest
// row i - split of w[1]. NR = 2: an item is the gate row n and the up row n + N of one output column.
struct Rows {
  const __nv_bfloat16* w[2];
  int64_t ldw[2];
  int64_t N[2];
  int64_t split;
  int64_t items;
  int64_t K;
  bool pre = true;  // the first segment's loads before the PDL wait
};

// The warp's loop over items warp, warp + warps, ...; each item's row(s) in segments of kSeg 16-byte chunks per
// lane (kSeg * 256 columns), the next segment's loads issued before the current one is multiplied; the first
// segment of the first item before the PDL wait. x(item) gives the activation row, store(item, v0, v1) the result.
template <int NR, int kSeg, class XRow, class Store>
__device__ __forceinline__ void warp_loop(const Rows& r, XRow x_row, Store store) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t chunks = r.K / 8;                      // 16-byte chunks per row
  const int64_t segs = (chunks + kSeg * 32 - 1) / (kSeg * 32);
  const int64_t my_items = warp < r.items ? (r.items - warp + warps - 1) / warps : 0;
  const int64_t units = my_items * segs;
  auto row_ptr = [&](int64_t item, int t) {
    const bool second = item >= r.split;
    const int64_t n = second ? item - r.split : item;
    const int pi = second ? 1 : 0;
    return (second ? r.w[1] : r.w[0]) + (n + (t == 1 ? r.N[pi] : 0)) * (second ? r.ldw[1] : r.ldw[0]);
  };
  auto load_unit = [&](int64_t u, uint4 (&buf)[NR][kSeg]) {
    const int64_t item = warp + (u / segs) * warps, seg = u % segs;
#pragma unroll
    for (int t = 0; t < NR; ++t) {
      const __nv_bfloat16* row = row_ptr(item, t);
#pragma unroll
      for (int i = 0; i < kSeg; ++i) {
        const int64_t c = (seg * kSeg + i) * 32 + lane;
        buf[t][i] = c < chunks ? ptx::load_stream(row + c * 8) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  uint4 cur[NR][kSeg], nxt[NR][kSeg];
  if (r.pre && units > 0) load_unit(0, cur);
  pdl_enter();
  if (!r.pre && units > 0) load_unit(0, cur);
  float acc[NR];
#pragma unroll
  for (int t = 0; t < NR; ++t) acc[t] = 0.0f;
  for (int64_t u = 0; u < units; ++u) {
    if (u + 1 < units) load_unit(u + 1, nxt);
    const int64_t item = warp + (u / segs) * warps, seg = u % segs;
    const __nv_bfloat16* x = x_row(item);
#pragma unroll
    for (int i = 0; i < kSeg; ++i) {
      const int64_t c = (seg * kSeg + i) * 32 + lane;
      const uint4 xv = c < chunks ? __ldg(reinterpret_cast<const uint4*>(x + c * 8)) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int t = 0; t < NR; ++t) acc[t] = ptx::dot8_bf16(cur[t][i], xv, acc[t]);
    }
    if (seg == segs - 1) {
#pragma unroll
      for (int t = 0; t < NR; ++t)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
      if (lane == 0) store(item, acc[0], acc[NR - 1]);
#pragma unroll
      for (int t = 0; t < NR; ++t) acc[t] = 0.0f;
    }
#pragma unroll
    for (int t = 0; t < NR; ++t)
#pragma unroll
      for (int i = 0; i < kSeg; ++i) cur[t][i] = nxt[t][i];
  }
}

}  // namespace ds::kernels::gemv
