// Row and column slices of host weights (block-FP8 scales sliced along, on whole 128-blocks only).
#include "model/tp_shard.h"

#include <cstring>

namespace ds {
namespace {

// Columns [b, e) of a 2-D host tensor, copied.
Tensor host_cols(const Tensor& t, int64_t b, int64_t e) {
  DS_CHECK(t.ndim() == 2 && t.device() == Device::kCpu && b >= 0 && b <= e && e <= t.dim(1), "columns [", b, ", ", e,
           ") of ", t.describe());
  const size_t es = dtype_size(t.dtype());
  Tensor out = Tensor::empty({t.dim(0), e - b}, t.dtype());
  for (int64_t r = 0; r < t.dim(0); ++r)
    std::memcpy(static_cast<char*>(out.data()) + static_cast<size_t>(r * (e - b)) * es,
                static_cast<const char*>(t.data()) + static_cast<size_t>(r * t.dim(1) + b) * es,
                static_cast<size_t>(e - b) * es);
  return out;
}

// Rows [b, e) of a 2-D host tensor, copied (a view would keep the whole checkpoint tensor alive per rank).
Tensor host_rows(const Tensor& t, int64_t b, int64_t e) {
  DS_CHECK(t.ndim() == 2 && b >= 0 && b <= e && e <= t.dim(0), "rows [", b, ", ", e, ") of ", t.describe());
  Tensor out = Tensor::empty({e - b, t.dim(1)}, t.dtype());
  std::memcpy(out.data(), t.rows(b, e).data(), out.nbytes());
  return out;
}

// A block boundary or the tensor's end: where a block-FP8 slice may start or stop.
bool on_block(int64_t i, int64_t block, int64_t extent) { return i % block == 0 || i == extent; }

Status slice_rows(LinearWeight& w, int64_t b, int64_t e, const char* what) {
  if (!w.defined()) return Status::ok();
  if (w.is_block_fp8()) {
    if (!on_block(b, w.block_n, w.out_features()) || !on_block(e, w.block_n, w.out_features()))
      return error("tensor parallelism: ", what, " rows [", b, ", ", e, ") of ", w.out_features(),
                   " are not whole ", w.block_n, "-row FP8 blocks");
    w.scale_inv = host_rows(w.scale_inv, b / w.block_n, (e + w.block_n - 1) / w.block_n);
  }
  w.weight = host_rows(w.weight, b, e);
  return Status::ok();
}

Status slice_cols(LinearWeight& w, int64_t b, int64_t e, const char* what) {
  if (!w.defined()) return Status::ok();
  if (w.is_block_fp8()) {
    if (!on_block(b, w.block_k, w.in_features()) || !on_block(e, w.block_k, w.in_features()))
      return error("tensor parallelism: ", what, " columns [", b, ", ", e, ") of ", w.in_features(),
                   " are not whole ", w.block_k, "-column FP8 blocks");
    w.scale_inv = host_cols(w.scale_inv, b / w.block_k, (e + w.block_k - 1) / w.block_k);
  }
  w.weight = host_cols(w.weight, b, e);
  return Status::ok();
}

// An MLP's intermediate slice: gate / up rows, down columns, 1/n of `inter` each.
Status shard_mlp(MlpWeights& m, int rank, int size, const char* what) {
  if (!m.gate.defined()) return Status::ok();
  const int64_t inter = m.gate.out_features();
  if (inter % size != 0)
    return error("tensor parallelism: ", what, "'s intermediate size ", inter, " does not divide by --tp-size ", size);
  const int64_t b = inter / size * rank, e = b + inter / size;
  DS_RETURN_IF_ERROR(slice_rows(m.gate, b, e, what));
  DS_RETURN_IF_ERROR(slice_rows(m.up, b, e, what));
  return slice_cols(m.down, b, e, what);
}

Status shard_layer(const ModelConfig& cfg, LayerWeights& l, int rank, int size, bool expert_parallel,
                   bool attention_whole) {
  if (!attention_whole) {
    const int64_t h = cfg.num_attention_heads / size, h0 = h * rank;
    AttentionWeights& a = l.attn;
    const int64_t dqk = cfg.qk_head_dim(), dkv = cfg.qk_nope_head_dim + cfg.v_head_dim;
    DS_RETURN_IF_ERROR(slice_rows(a.q_proj, h0 * dqk, (h0 + h) * dqk, "q_proj"));
    DS_RETURN_IF_ERROR(slice_rows(a.q_b_proj, h0 * dqk, (h0 + h) * dqk, "q_b_proj"));
    DS_RETURN_IF_ERROR(slice_rows(a.kv_b_proj, h0 * dkv, (h0 + h) * dkv, "kv_b_proj"));
    DS_RETURN_IF_ERROR(slice_cols(a.o_proj, h0 * cfg.v_head_dim, (h0 + h) * cfg.v_head_dim, "o_proj"));
  }
  if (!l.is_moe) return shard_mlp(l.dense, rank, size, "the dense MLP");
  if (expert_parallel) {
    const int64_t per = static_cast<int64_t>(l.moe.experts.size()) / size;
    for (int64_t e = 0; e < static_cast<int64_t>(l.moe.experts.size()); ++e)
      if (e / per != rank) l.moe.experts[e] = MlpWeights{};  // another rank's
  } else {
    for (MlpWeights& e : l.moe.experts) DS_RETURN_IF_ERROR(shard_mlp(e, rank, size, "a routed expert"));
  }
  return shard_mlp(l.moe.shared, rank, size, "the shared experts");
}

}  // namespace

Result<TpShard> shard_for_tensor_parallel(const ModelConfig& cfg, const ModelWeights& w, int rank, int size,
                                          bool expert_parallel, bool attention_whole) {
  if (size < 1 || rank < 0 || rank >= size) return error("tensor parallelism: rank ", rank, " of ", size);
  if (!attention_whole && cfg.num_attention_heads % size != 0)
    return error("--tp-size ", size, " does not divide the model's ", cfg.num_attention_heads, " attention heads");
  if (expert_parallel && cfg.n_routed_experts % size != 0)
    return error("--ep-size ", size, " does not divide the model's ", cfg.n_routed_experts, " routed experts");
  TpShard s{cfg, w};
  if (size == 1) return s;
  for (LayerWeights& l : s.weights.layers)
    DS_RETURN_IF_ERROR(shard_layer(cfg, l, rank, size, expert_parallel, attention_whole));
  for (MtpWeights& m : s.weights.mtp)
    DS_RETURN_IF_ERROR(shard_layer(cfg, m.layer, rank, size, expert_parallel, attention_whole));
  if (!attention_whole) s.config.num_attention_heads /= size;
  s.config.intermediate_size /= size;
  // (With expert parallelism the routed experts keep their width; the shared ones, cut, are checked by shape.)
  if (!expert_parallel) s.config.moe_intermediate_size /= size;
  return s;
}

}  // namespace ds
