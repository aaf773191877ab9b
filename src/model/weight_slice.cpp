// Host-side slicing of linear weights (see weight_slice.h).
#include "model/weight_slice.h"

#include <cstring>

namespace ds {

Tensor host_cols(const Tensor& t, int64_t c0, int64_t c1) {
  DS_CHECK(t.ndim() == 2 && t.device() == Device::kCpu && c0 >= 0 && c0 <= c1 && c1 <= t.dim(1), "columns [", c0,
           ", ", c1, ") of ", t.describe());
  const int64_t R = t.dim(0), C = t.dim(1);
  const size_t es = dtype_size(t.dtype());
  Tensor out = Tensor::empty({R, c1 - c0}, t.dtype());
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(static_cast<char*>(out.data()) + r * (c1 - c0) * es, static_cast<const char*>(t.data()) + (r * C + c0) * es,
                (c1 - c0) * es);
  return out;
}

namespace {

// Rows [r0, r1) of a 2-D host tensor: a view, or a copy.
Tensor host_rows(const Tensor& t, int64_t r0, int64_t r1, bool copy) {
  Tensor v = t.rows(r0, r1);
  if (!copy) return v;
  Tensor out = Tensor::empty(v.shape(), v.dtype());
  std::memcpy(out.data(), v.data(), out.nbytes());
  return out;
}

}  // namespace

LinearWeight linear_rows(const LinearWeight& w, int64_t r0, int64_t r1, bool copy) {
  LinearWeight p = w;
  p.weight = host_rows(w.weight, r0, r1, copy);
  if (w.is_block_fp8()) p.scale_inv = host_rows(w.scale_inv, r0 / w.block_n, (r1 + w.block_n - 1) / w.block_n, copy);
  return p;
}

LinearWeight linear_cols(const LinearWeight& w, int64_t c0, int64_t c1) {
  LinearWeight p = w;
  p.weight = host_cols(w.weight, c0, c1);
  if (w.is_block_fp8()) p.scale_inv = host_cols(w.scale_inv, c0 / w.block_k, (c1 + w.block_k - 1) / w.block_k);
  return p;
}

}  // namespace ds
