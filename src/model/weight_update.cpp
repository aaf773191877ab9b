// DeepseekModel::update_weights: new checkpoint values into the prepared weights, in place (deepseek_model.h).
#include <string>

#include "model/deepseek_model.h"

namespace ds {
namespace {

// Plain tensors (norms, biases, embeddings, the absorbed products), named in errors.
Status update_tensor(Ops& ops, Tensor& dst, const Tensor& src, const char* what) {
  if (Status st = ops.update_tensor(dst, src); !st) return error(what, ": ", st.message());
  return Status::ok();
}

Status update_linear(Ops& ops, LinearWeight& dst, const LinearWeight& src, const char* what) {
  if (Status st = ops.update_prepared(dst, src); !st) return error(what, ": ", st.message());
  return Status::ok();
}

Status update_mlp(Ops& ops, PreparedMlp& dst, const PreparedMlp& src, const char* what) {
  DS_RETURN_IF_ERROR(update_linear(ops, dst.gate_up, src.gate_up, what));
  return update_linear(ops, dst.down, src.down, what);
}

Status update_heads(Ops& ops, HeadsFp8& dst, const HeadsFp8& src, const char* what) {
  DS_RETURN_IF_ERROR(update_tensor(ops, dst.w, src.w, what));
  DS_RETURN_IF_ERROR(update_tensor(ops, dst.scale, src.scale, what));
  dst.ue8m0 = src.ue8m0;
  return Status::ok();
}

}  // namespace

Status DeepseekModel::update_layer(Layer& dst, const Layer& src) {
  Ops& o = ops_;
  DS_RETURN_IF_ERROR(update_tensor(o, dst.input_norm, src.input_norm, "input_layernorm"));
  DS_RETURN_IF_ERROR(update_tensor(o, dst.post_attn_norm, src.post_attn_norm, "post_attention_layernorm"));
  Attention& a = dst.attn;
  const Attention& b = src.attn;
  DS_RETURN_IF_ERROR(update_linear(o, a.q_proj, b.q_proj, "q_proj"));
  DS_RETURN_IF_ERROR(update_linear(o, a.q_a_proj, b.q_a_proj, "q_a_proj"));
  DS_RETURN_IF_ERROR(update_linear(o, a.q_b_proj, b.q_b_proj, "q_b_proj"));
  DS_RETURN_IF_ERROR(update_linear(o, a.kv_a_proj, b.kv_a_proj, "kv_a_proj_with_mqa"));
  DS_RETURN_IF_ERROR(update_linear(o, a.kv_b_proj, b.kv_b_proj, "kv_b_proj"));
  DS_RETURN_IF_ERROR(update_linear(o, a.o_proj, b.o_proj, "o_proj"));
  DS_RETURN_IF_ERROR(update_tensor(o, a.q_a_norm, b.q_a_norm, "q_a_layernorm"));
  DS_RETURN_IF_ERROR(update_tensor(o, a.kv_a_norm, b.kv_a_norm, "kv_a_layernorm"));
  DS_RETURN_IF_ERROR(update_tensor(o, a.w_kc, b.w_kc, "kv_b_proj (absorbed W_UK)"));
  DS_RETURN_IF_ERROR(update_tensor(o, a.w_vc, b.w_vc, "kv_b_proj (absorbed W_UV)"));
  DS_RETURN_IF_ERROR(update_heads(o, a.w_kc8, b.w_kc8, "kv_b_proj (absorbed W_UK, FP8)"));
  DS_RETURN_IF_ERROR(update_heads(o, a.w_vc8, b.w_vc8, "kv_b_proj (absorbed W_UV, FP8)"));
  if (a.has_indexer != b.has_indexer) return error("indexer: present in one checkpoint only");
  DS_RETURN_IF_ERROR(update_linear(o, a.idx_wq_b, b.idx_wq_b, "indexer.wq_b"));
  DS_RETURN_IF_ERROR(update_linear(o, a.idx_wk, b.idx_wk, "indexer.wk"));
  DS_RETURN_IF_ERROR(update_linear(o, a.idx_weights_proj, b.idx_weights_proj, "indexer.weights_proj"));
  DS_RETURN_IF_ERROR(update_tensor(o, a.idx_k_norm_w, b.idx_k_norm_w, "indexer.k_norm.weight"));
  DS_RETURN_IF_ERROR(update_tensor(o, a.idx_k_norm_b, b.idx_k_norm_b, "indexer.k_norm.bias"));
  if (dst.is_moe != src.is_moe || dst.has_shared != src.has_shared || dst.experts.size() != src.experts.size())
    return error("mlp: a dense / MoE layout other than this model's");
  if (!dst.is_moe) return update_mlp(o, dst.dense, src.dense, "mlp");
  DS_RETURN_IF_ERROR(update_tensor(o, dst.router, src.router, "mlp.gate"));
  DS_RETURN_IF_ERROR(update_tensor(o, dst.correction_bias, src.correction_bias, "mlp.gate.e_score_correction_bias"));
  for (size_t e = 0; e < dst.experts.size(); ++e)
    DS_RETURN_IF_ERROR(update_mlp(o, dst.experts[e], src.experts[e], "mlp.experts"));
  if (dst.has_shared) DS_RETURN_IF_ERROR(update_mlp(o, dst.shared, src.shared, "mlp.shared_experts"));
  return Status::ok();
}

Status DeepseekModel::update_weights(const ModelWeights& w) {
  if (w.layers.size() != layers_.size() || w.mtp.size() != mtp_.size())
    return error("the checkpoint has ", w.layers.size(), " layers and ", w.mtp.size(), " MTP modules, this model ",
                 layers_.size(), " and ", mtp_.size());
  // Fresh preparations first, compared against the current ones, then copied: each layer's fresh copy is released
  // before the next is made.
  {
    Tensor embed = ops_.prepare_param(w.embed), norm = ops_.prepare_param(w.final_norm);
    LinearWeight head = ops_.prepare_linear(w.lm_head);
    DS_RETURN_IF_ERROR(update_tensor(ops_, embed_, embed, "embed_tokens"));
    DS_RETURN_IF_ERROR(update_tensor(ops_, final_norm_, norm, "norm"));
    DS_RETURN_IF_ERROR(update_linear(ops_, lm_head_, head, "lm_head"));
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer fresh = prepare_layer(w.layers[l]);
    if (Status st = update_layer(layers_[l], fresh); !st)
      return error("layer ", l, ": ", st.message());
  }
  for (size_t i = 0; i < mtp_.size(); ++i) {
    const MtpWeights& mw = w.mtp[i];
    Mtp& m = mtp_[i];
    const std::string at = "MTP module " + std::to_string(i) + ": ";
    const auto fail = [&](const Status& st) { return error(at, st.message()); };
    if (Status st = update_tensor(ops_, m.enorm, ops_.prepare_param(mw.enorm), "enorm"); !st) return fail(st);
    if (Status st = update_tensor(ops_, m.hnorm, ops_.prepare_param(mw.hnorm), "hnorm"); !st) return fail(st);
    if (Status st = update_tensor(ops_, m.shared_head_norm, ops_.prepare_param(mw.shared_head_norm), "shared_head.norm");
        !st)
      return fail(st);
    // An MTP module without its own embedding / head shares the main model's (updated above).
    if (mw.embed.defined())
      if (Status st = update_tensor(ops_, m.embed, ops_.prepare_param(mw.embed), "embed_tokens"); !st) return fail(st);
    LinearWeight eh = ops_.prepare_linear(mw.eh_proj);
    if (Status st = update_linear(ops_, m.eh_proj, eh, "eh_proj"); !st) return fail(st);
    if (mw.shared_head.defined()) {
      LinearWeight head = ops_.prepare_linear(mw.shared_head);
      if (Status st = update_linear(ops_, m.shared_head, head, "shared_head.head"); !st) return fail(st);
    }
    const Layer fresh = prepare_layer(mw.layer);
    if (Status st = update_layer(m.layer, fresh); !st) return fail(st);
  }
  return Status::ok();
}

}  // namespace ds
