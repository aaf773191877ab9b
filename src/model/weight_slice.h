// Row and column slices of host linear weights, their block-FP8 scales sliced along: the cuts of shared-experts
// fusion (model/shared_fusion) and of tensor parallelism (model/tp_shard).
#pragma once
#include <cstdint>

#include "ops/linear_weight.h"

namespace ds {

// Columns [c0, c1) of a row-major 2-D host tensor, copied.
Tensor host_cols(const Tensor& t, int64_t c0, int64_t c1);

// Output rows [r0, r1) of w and, block-FP8, its scale rows [r0 / block_n, ceil(r1 / block_n)): r0 and r1 on
// block_n boundaries or at the end (the caller checks). copy: the slices own their memory (the source may go);
// else they are views of w's.
LinearWeight linear_rows(const LinearWeight& w, int64_t r0, int64_t r1, bool copy);
// Input columns [c0, c1) of w and its scale columns likewise (always copies).
LinearWeight linear_cols(const LinearWeight& w, int64_t c0, int64_t c1);

}  // namespace ds
