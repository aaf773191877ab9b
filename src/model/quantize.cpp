// Load-time FP8 quantization (see quantize.h).
#include "model/quantize.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "ops/fp8.h"

namespace ds {
namespace {

// Every weight --quantization fp8 converts (attention and indexer linears, dense / expert / shared MLPs).
void collect_layer(LayerWeights& l, std::vector<LinearWeight*>& out) {
  for (LinearWeight* p : {&l.attn.q_proj, &l.attn.q_a_proj, &l.attn.q_b_proj, &l.attn.kv_a_proj, &l.attn.kv_b_proj,
                          &l.attn.o_proj, &l.indexer.wq_b, &l.indexer.wk})
    out.push_back(p);
  auto mlp = [&](MlpWeights& m) {
    out.push_back(&m.gate);
    out.push_back(&m.up);
    out.push_back(&m.down);
  };
  if (l.is_moe) {
    for (MlpWeights& e : l.moe.experts) mlp(e);
    mlp(l.moe.shared);
  } else {
    mlp(l.dense);
  }
}

}  // namespace

void quantize_weights_fp8(ModelWeights* w, ModelConfig* cfg) {
  const bool ue8m0 = cfg->fp8.ue8m0;
  std::vector<LinearWeight*> todo;
  for (LayerWeights& l : w->layers) collect_layer(l, todo);
  for (MtpWeights& m : w->mtp) collect_layer(m.layer, todo);
  // Independent weights, quantized on all cores: a full-size checkpoint (15.7B parameters for V2-Lite) is
  // minutes of scalar e4m3 encoding on one core.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      LinearWeight& l = *todo[i];
      if (l.defined() && !l.is_block_fp8()) l = quantize_weight_fp8(l.weight, 128, 128, ue8m0);
    }
  };
  const size_t threads = std::min<size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  cfg->fp8.enabled = true;
  cfg->fp8.block_n = cfg->fp8.block_k = 128;
}

ModelConfig dummy_weights_config(const ModelConfig& cfg, const std::string& quantization) {
  ModelConfig made = cfg;
  if (quantization == "fp8" && !made.fp8.enabled && !made.fp8.ue8m0) {
    made.fp8.enabled = true;
    made.fp8.block_n = made.fp8.block_k = 128;
  }
  return made;
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
