// Each rank's slices of the weights (model/weight_slice.h), block-FP8 ones on whole 128-blocks only.
#include "model/tp_shard.h"

#include "model/weight_slice.h"

namespace ds {
namespace {

// A block boundary or the tensor's end: where a block-FP8 slice may start or stop.
bool on_block(int64_t i, int64_t block, int64_t extent) { return i % block == 0 || i == extent; }

enum class Axis { kRows, kCols };

// w cut to output rows (kRows) or input columns (kCols) [b, e), copied (a view would keep the whole checkpoint
// tensor alive on every rank); block-FP8 slices only on whole blocks.
Status slice(LinearWeight& w, Axis axis, int64_t b, int64_t e, const char* what) {
  if (!w.defined()) return Status::ok();
  const bool rows = axis == Axis::kRows;
  const int64_t block = rows ? w.block_n : w.block_k, extent = rows ? w.out_features() : w.in_features();
  if (w.is_block_fp8() && (!on_block(b, block, extent) || !on_block(e, block, extent)))
    return error("tensor parallelism: ", what, rows ? " rows [" : " columns [", b, ", ", e, ") of ", extent,
                 " are not whole ", block, rows ? "-row" : "-column", " FP8 blocks");
  w = rows ? linear_rows(w, b, e, /*copy=*/true) : linear_cols(w, b, e);
  return Status::ok();
}

// An MLP's intermediate slice: gate / up rows, down columns, 1/n of `inter` each.
Status shard_mlp(MlpWeights& m, int rank, int size, const char* what) {
  if (!m.gate.defined()) return Status::ok();
  const int64_t inter = m.gate.out_features();
  if (inter % size != 0)
    return error("tensor parallelism: ", what, "'s intermediate size ", inter, " does not divide by --tp-size ", size);
  const int64_t b = inter / size * rank, e = b + inter / size;
  DS_RETURN_IF_ERROR(slice(m.gate, Axis::kRows, b, e, what));
  DS_RETURN_IF_ERROR(slice(m.up, Axis::kRows, b, e, what));
  return slice(m.down, Axis::kCols, b, e, what);
}

Status shard_layer(const ModelConfig& cfg, LayerWeights& l, int rank, int size, bool expert_parallel,
                   bool attention_whole) {
  if (!attention_whole) {
    const int64_t h = cfg.num_attention_heads / size, h0 = h * rank;
    AttentionWeights& a = l.attn;
    const int64_t dqk = cfg.qk_head_dim(), dkv = cfg.qk_nope_head_dim + cfg.v_head_dim;
    DS_RETURN_IF_ERROR(slice(a.q_proj, Axis::kRows, h0 * dqk, (h0 + h) * dqk, "q_proj"));
    DS_RETURN_IF_ERROR(slice(a.q_b_proj, Axis::kRows, h0 * dqk, (h0 + h) * dqk, "q_b_proj"));
    DS_RETURN_IF_ERROR(slice(a.kv_b_proj, Axis::kRows, h0 * dkv, (h0 + h) * dkv, "kv_b_proj"));
    DS_RETURN_IF_ERROR(slice(a.o_proj, Axis::kCols, h0 * cfg.v_head_dim, (h0 + h) * cfg.v_head_dim, "o_proj"));
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

Status check_tensor_parallel(const ModelConfig& cfg, int size, bool expert_parallel, bool attention_whole) {
  if (!attention_whole && cfg.num_attention_heads % size != 0)
    return error("--tp-size ", size, " does not divide the model's ", cfg.num_attention_heads, " attention heads");
  if (expert_parallel && cfg.n_routed_experts % size != 0)
    return error("--ep-size ", size, " does not divide the model's ", cfg.n_routed_experts, " routed experts");
  return Status::ok();
}

Result<TpShard> shard_for_tensor_parallel(const ModelConfig& cfg, const ModelWeights& w, int rank, int size,
                                          bool expert_parallel, bool attention_whole) {
  if (size < 1 || rank < 0 || rank >= size) return error("tensor parallelism: rank ", rank, " of ", size);
  DS_RETURN_IF_ERROR(check_tensor_parallel(cfg, size, expert_parallel, attention_whole));
  TpShard s{cfg, w};
  if (size == 1) return s;
  for (LayerWeights& l : s.weights.layers)
    DS_RETURN_IF_ERROR(shard_layer(cfg, l, rank, size, expert_parallel, attention_whole));
  for (MtpWeights& m : s.weights.mtp)
    DS_RETURN_IF_ERROR(shard_layer(cfg, m.layer, rank, size, expert_parallel, attention_whole));
  DS_ASSIGN_OR_RETURN(s.config, tensor_parallel_config(cfg, size, expert_parallel, attention_whole));
  return s;
}

Result<ModelConfig> tensor_parallel_config(const ModelConfig& cfg, int size, bool expert_parallel,
                                           bool attention_whole, bool fp8_blocks) {
  if (size < 1) return error("tensor parallelism over ", size, " ranks");
  DS_RETURN_IF_ERROR(check_tensor_parallel(cfg, size, expert_parallel, attention_whole));
  ModelConfig out = cfg;
  if (size == 1) return out;
  // Each cut extent: divisible, and on whole 128-blocks where the weights are block-FP8 (as slice() demands).
  const bool fp8 = fp8_blocks && cfg.fp8.enabled;
  auto cut = [&](int64_t extent, int64_t block, const char* what) -> Status {
    if (extent % size != 0)
      return error("tensor parallelism: ", what, " ", extent, " does not divide by --tp-size ", size);
    if (fp8 && block > 0 && (extent / size) % block != 0)
      return error("tensor parallelism: ", what, " ", extent, " over ", size, " ranks is ", extent / size,
                   " a rank, not whole ", block, "-wide FP8 blocks");
    return Status::ok();
  };
  if (!attention_whole) {
    const int64_t h = cfg.num_attention_heads / size;
    DS_RETURN_IF_ERROR(cut(cfg.num_attention_heads * cfg.qk_head_dim(), cfg.fp8.block_n, "q_b_proj rows"));
    DS_RETURN_IF_ERROR(
        cut(cfg.num_attention_heads * (cfg.qk_nope_head_dim + cfg.v_head_dim), cfg.fp8.block_n, "kv_b_proj rows"));
    DS_RETURN_IF_ERROR(cut(cfg.num_attention_heads * cfg.v_head_dim, cfg.fp8.block_k, "o_proj columns"));
    out.num_attention_heads = h;
  }
  if (cfg.first_k_dense_replace > 0 || cfg.n_routed_experts == 0 || cfg.moe_layer_freq > 1)
    DS_RETURN_IF_ERROR(cut(cfg.intermediate_size, cfg.fp8.block_n, "the dense MLP's intermediate size"));
  if (cfg.n_routed_experts > 0) {
    if (!expert_parallel) DS_RETURN_IF_ERROR(cut(cfg.moe_intermediate_size, cfg.fp8.block_n, "an expert's intermediate size"));
    if (cfg.n_shared_experts > 0)
      DS_RETURN_IF_ERROR(cut(cfg.moe_intermediate_size * cfg.n_shared_experts, cfg.fp8.block_n,
                             "the shared experts' intermediate size"));
  }
  out.intermediate_size /= size;
  // (With expert parallelism the routed experts keep their width; the shared ones, cut, are checked by shape.)
  if (!expert_parallel) out.moe_intermediate_size /= size;
  return out;
}

}  // namespace ds
