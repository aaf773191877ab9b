// Cutting a shared MLP into expert-sized parts (see shared_fusion.h).
#include "model/shared_fusion.h"

#include <cstring>

namespace ds {
namespace {

bool same_layout(const LinearWeight& a, const LinearWeight& b) {
  return a.defined() && b.defined() && a.weight.ndim() == 2 && b.weight.ndim() == 2 &&
         a.weight.dtype() == b.weight.dtype() && a.weight.device() == Device::kCpu &&
         b.weight.device() == Device::kCpu && a.is_block_fp8() == b.is_block_fp8() &&
         (!a.is_block_fp8() || (a.block_n == b.block_n && a.block_k == b.block_k && a.scale_inv.ndim() == 2 &&
                                a.scale_inv.device() == Device::kCpu && a.scale_inv.dtype() == DType::kF32));
}

// Columns [c0, c1) of a row-major host matrix, copied.
Tensor cols(const Tensor& t, int64_t c0, int64_t c1) {
  const int64_t R = t.dim(0), C = t.dim(1);
  const size_t es = dtype_size(t.dtype());
  Tensor out = Tensor::empty({R, c1 - c0}, t.dtype());
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(static_cast<char*>(out.data()) + r * (c1 - c0) * es, static_cast<const char*>(t.data()) + (r * C + c0) * es,
                (c1 - c0) * es);
  return out;
}

LinearWeight row_part(const LinearWeight& w, int64_t inter, int j) {
  LinearWeight p = w;
  p.weight = w.weight.rows(j * inter, (j + 1) * inter);
  if (w.is_block_fp8()) p.scale_inv = w.scale_inv.rows(j * inter / w.block_n, (j + 1) * inter / w.block_n);
  return p;
}

LinearWeight col_part(const LinearWeight& w, int64_t inter, int j) {
  LinearWeight p = w;
  p.weight = cols(w.weight, j * inter, (j + 1) * inter);
  if (w.is_block_fp8()) p.scale_inv = cols(w.scale_inv, j * inter / w.block_k, (j + 1) * inter / w.block_k);
  return p;
}

}  // namespace

bool can_split_shared(const MoeWeights& moe, int parts) {
  if (parts < 1 || moe.experts.empty()) return false;
  const MlpWeights& s = moe.shared;
  const MlpWeights& e = moe.experts[0];
  if (!same_layout(s.gate, e.gate) || !same_layout(s.up, e.up) || !same_layout(s.down, e.down)) return false;
  const int64_t inter = e.gate.out_features(), d = e.gate.in_features();
  if (inter < 1 || e.up.weight.shape() != e.gate.weight.shape() || e.down.weight.shape() != Shape{d, inter} ||
      s.gate.weight.shape() != Shape{parts * inter, d} || s.up.weight.shape() != Shape{parts * inter, d} ||
      s.down.weight.shape() != Shape{d, parts * inter})
    return false;
  if (!s.gate.is_block_fp8() || parts == 1) return true;  // one part: the expert's own layout
  // The cut falls on scale-block boundaries, and the scale grids are the full ones.
  const auto grid = [](const LinearWeight& w) {
    return w.scale_inv.shape() == Shape{(w.out_features() + w.block_n - 1) / w.block_n,
                                        (w.in_features() + w.block_k - 1) / w.block_k};
  };
  return inter % s.gate.block_n == 0 && inter % s.up.block_n == 0 && inter % s.down.block_k == 0 && grid(s.gate) &&
         grid(s.up) && grid(s.down);
}

std::vector<MlpWeights> split_shared(const MoeWeights& moe, int parts) {
  DS_CHECK(can_split_shared(moe, parts), "shared MLP does not cut into ", parts, " experts");
  if (parts == 1) return {moe.shared};
  const int64_t inter = moe.experts[0].gate.out_features();
  std::vector<MlpWeights> out;
  for (int j = 0; j < parts; ++j)
    out.push_back(MlpWeights{row_part(moe.shared.gate, inter, j), row_part(moe.shared.up, inter, j),
                             col_part(moe.shared.down, inter, j)});
  return out;
}

}  // namespace ds
