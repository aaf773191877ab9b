// Which expert and rows a small-M MoE decode CTA serves (blockIdx.y = its active slot): from the grouping's slot
// records in one load round (kernels/moe.h), or from the active list, counts, offsets and source rows; the same for
// a walk's tile. Shared by the bf16 and FP8 small-M expert kernels (moe_gemm.cu, moe_fp8.cu), whose parameter structs
// name these fields alike.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/moe.h"

namespace ds::kernels::moe_detail {

struct BlockRows {
  int e = 0, cnt = 0;                    // the expert and its rows
  int64_t row0 = 0, xr0 = 0, xr1 = 0;  // its first permuted row; the x rows of mma rows g and g + 8
};

// The slot record: header and the source rows of mma rows g (and g + 8 with kM16) in one round of loads.
template <bool kM16, class Params>
__device__ __forceinline__ BlockRows block_rows_from_slot(const Params& p, int g) {
  const int32_t* rec = p.slots + static_cast<int64_t>(blockIdx.y) * kMoeSlotInts;
  const int4 h = *reinterpret_cast<const int4*>(rec);
  const int32_t s0 = rec[kMoeSlotHeader + g], s1 = kM16 ? rec[kMoeSlotHeader + 8 + g] : 0;
  BlockRows b;
  b.e = h.x;
  b.cnt = h.y;
  b.row0 = h.z;
  b.xr0 = p.src_rows ? s0 : b.row0 + g;
  b.xr1 = p.src_rows ? s1 : b.row0 + g + 8;
  return b;
}

// The same from the lists (dependent loads); false when slot blockIdx.y holds no active expert. An expert without
// rows comes back with cnt 0 and nothing else read.
template <bool kM16, class Params>
__device__ __forceinline__ bool block_rows_from_lists(const Params& p, int g, BlockRows* b) {
  int e = blockIdx.y;
  if (p.active) {
    if (e >= *p.num_active) return false;
    e = p.active[e];
  }
  b->e = e;
  b->cnt = p.counts[e];
  if (b->cnt == 0) return true;
  b->row0 = p.offsets[e];
  auto x_row = [&](int i) -> int64_t { return p.src_rows ? p.src_rows[b->row0 + i] : b->row0 + i; };
  if (g < b->cnt) b->xr0 = x_row(g);
  if (kM16 && g + 8 < b->cnt) b->xr1 = x_row(g + 8);
  return true;
}

// A walk's tile t (column tile t % tiles_x of slot t / tiles_x, the walks of moe_gemm.cu and moe_fp8.cu): its slot
// header {expert, count, offset} and the activation row of mma row g. False past the end or on a slot without
// rows: those are a suffix (kernels/moe.h), so every later tile of the walk is empty too and the walk stops there.
// (At batch 8 about a quarter of V2-Lite's 48 slots are empty; stepping over their tiles one record read at a time
// cost the FP8 walk ~4%: s33f, H200, FP8 batch 8 3.88 / 3.89 vs 4.04 / 4.04 ms, batch 1 1.70 vs 1.69-1.70.)
template <class Params>
__device__ __forceinline__ bool walk_tile_slot(const Params& p, int t, int tiles_x, int total, int g, int4* h,
                                               int64_t* xr0) {
  if (t >= total) return false;
  const int32_t* rec = p.slots + static_cast<int64_t>(t / tiles_x) * kMoeSlotInts;
  *h = *reinterpret_cast<const int4*>(rec);
  if (h->y == 0) return false;
  *xr0 = p.src_rows ? rec[kMoeSlotHeader + g] : h->z + g;
  return true;
}

// A walk's slot record loaded a tile ahead (the FP8 walk): the header and mma row g's source row, two independent
// loads issued while the current tile's copies are in flight, so no L2 round trip sits between one tile's
// reduction and the next tile's copies (walk_tile_slot's two dependent loads did). y (the count) is 0 past the end.
// H200, session 35 (s35b, V2-Lite --quantization fp8, three alternating rounds): batch 8 3.80 / 3.86 / 3.82 vs
// 3.90 / 3.94 / 3.93 ms, batch 1 a tie (1.66-1.68 vs 1.67-1.69). The bf16 walk (moe_gemm.cu, the down product at
// one token) with it: 2.05-2.07 vs 2.02-2.05 ms at batch 1, so it keeps walk_tile_slot.
struct WalkRec {
  int4 h;
  int32_t src;
};
template <class Params>
__device__ __forceinline__ WalkRec walk_rec_load(const Params& p, int t, int tiles_x, int total, int g) {
  WalkRec r{make_int4(0, 0, 0, 0), 0};
  if (t < total) {
    const int32_t* rec = p.slots + static_cast<int64_t>(t / tiles_x) * kMoeSlotInts;
    r.h = *reinterpret_cast<const int4*>(rec);
    if (p.src_rows) r.src = rec[kMoeSlotHeader + g];
  }
  return r;
}
// walk_tile_slot's answer from a loaded record.
template <class Params>
__device__ __forceinline__ bool walk_rec_slot(const Params& p, const WalkRec& r, int g, int4* h, int64_t* xr0) {
  if (r.h.y == 0) return false;
  *h = r.h;
  *xr0 = p.src_rows ? r.src : r.h.z + g;
  return true;
}

}  // namespace ds::kernels::moe_detail
