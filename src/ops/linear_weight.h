// LinearWeight: the weight of one linear layer as stored or as prepared by a backend.
// Shared by the checkpoint loader (model/weights.h) and the op interface (ops/ops.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace ds {

// y = W x with W: [out, in]. Block-FP8 iff scale_inv is defined:
// W[i, j] = float(weight[i, j]) * scale_inv[i / block_n, j / block_k] (multiplied, despite the name).
struct LinearWeight {
  Tensor weight;     // [out, in]
  Tensor scale_inv;  // [ceil(out / block_n), ceil(in / block_k)] F32, or undefined
  int block_n = 128;
  int block_k = 128;
  int64_t out_features() const { return weight.dim(0); }
  int64_t in_features() const { return weight.dim(1); }
  bool is_block_fp8() const { return scale_inv.defined(); }
  bool defined() const { return weight.defined(); }
};

}  // namespace ds
