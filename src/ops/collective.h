// Collective: one rank's handle on a tensor-parallel group, as the op interface sees it (Ops::all_reduce_).
// Implementations live in dist/ (an in-process group of threads for the CPU backend; NCCL for CUDA to come).
#pragma once
#include "core/tensor.h"

namespace ds {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // t = the sum of every rank's t, element-wise, in place; the same value on every rank (bit for bit: ranks then
  // make identical replicated computations and samples). Every rank calls it with the same shape and dtype.
  virtual void all_reduce_sum(Tensor& t) = 0;
};

}  // namespace ds
