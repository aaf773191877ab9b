// Load-time FP8 quantization (see quantize.h).
#include "model/quantize.h"

#include "ops/fp8.h"

namespace ds {
namespace {

void quantize(LinearWeight& l, bool ue8m0) {
  if (!l.defined() || l.is_block_fp8()) return;
  l = quantize_weight_fp8(l.weight, 128, 128, ue8m0);
}

void quantize_mlp(MlpWeights& m, bool ue8m0) {
  quantize(m.gate, ue8m0);
  quantize(m.up, ue8m0);
  quantize(m.down, ue8m0);
}

void quantize_layer(LayerWeights& l, bool ue8m0) {
  for (LinearWeight* p : {&l.attn.q_proj, &l.attn.q_a_proj, &l.attn.q_b_proj, &l.attn.kv_a_proj, &l.attn.kv_b_proj,
                          &l.attn.o_proj, &l.indexer.wq_b, &l.indexer.wk})
    quantize(*p, ue8m0);
  if (l.is_moe) {
    for (MlpWeights& e : l.moe.experts) quantize_mlp(e, ue8m0);
    quantize_mlp(l.moe.shared, ue8m0);
  } else {
    quantize_mlp(l.dense, ue8m0);
  }
}

}  // namespace

void quantize_weights_fp8(ModelWeights* w, ModelConfig* cfg) {
  const bool ue8m0 = cfg->fp8.ue8m0;
  for (LayerWeights& l : w->layers) quantize_layer(l, ue8m0);
  for (MtpWeights& m : w->mtp) quantize_layer(m.layer, ue8m0);
  cfg->fp8.enabled = true;
  cfg->fp8.block_n = cfg->fp8.block_k = 128;
}

Status apply_quantization_flag(const std::string& value, ModelWeights* w, ModelConfig* cfg) {
  if (value.empty() || value == "none") return Status::ok();
  if (value == "fp8") {
    quantize_weights_fp8(w, cfg);
    return Status::ok();
  }
  return error("--quantization must be fp8 (or omitted), got '", value, "'");
}

}  // namespace ds
