// Cutting a shared MLP into expert-sized parts (see shared_fusion.h).
#include "model/shared_fusion.h"

#include "model/weight_slice.h"

namespace ds {
namespace {

bool same_layout(const LinearWeight& a, const LinearWeight& b) {
  return a.defined() && b.defined() && a.weight.ndim() == 2 && b.weight.ndim() == 2 &&
         a.weight.dtype() == b.weight.dtype() && a.weight.device() == Device::kCpu &&
         b.weight.device() == Device::kCpu && a.is_block_fp8() == b.is_block_fp8() &&
         (!a.is_block_fp8() || (a.block_n == b.block_n && a.block_k == b.block_k && a.scale_inv.ndim() == 2 &&
                                a.scale_inv.device() == Device::kCpu && a.scale_inv.dtype() == DType::kF32));
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
    out.push_back(MlpWeights{linear_rows(moe.shared.gate, j * inter, (j + 1) * inter, /*copy=*/false),
                             linear_rows(moe.shared.up, j * inter, (j + 1) * inter, /*copy=*/false),
                             linear_cols(moe.shared.down, j * inter, (j + 1) * inter)});
  return out;
}

}  // namespace ds
