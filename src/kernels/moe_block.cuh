// Which expert and rows a small-M MoE decode CTA serves (blockIdx.y = its active slot): from the grouping's slot
// records in one load round (kernels/moe.h), or from the active list, counts, offsets and source rows. Shared by the
// bf16 and FP8 small-M expert kernels (moe_gemm.cu, moe_fp8.cu), whose parameter structs name these fields alike.
#pragma once
#include <cstdint>

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

}  // namespace ds::kernels::moe_detail
