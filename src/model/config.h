// ModelConfig: every config.json field dserve uses, for deepseek_v2 (V2, V2-Lite), deepseek_v3 (V3, R1,
// V3.1) and deepseek_v32 (V3.2), plus the values derived from them (YaRN frequencies, softmax scale).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ds {

enum class ModelFamily { kDeepseekV2, kDeepseekV3, kDeepseekV32 };
enum class TopkMethod { kGreedy, kGroupLimitedGreedy, kNoauxTc };
enum class ScoringFunc { kSoftmax, kSigmoid };

struct RopeScaling {
  std::string type = "default";  // "default" or "yarn" (rope_scaling.type / rope_parameters.rope_type)
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0 = absent
  double mscale_all_dim = 0.0;  // 0 = absent
  double attention_factor = 0.0;  // 0 = absent (derived as transformers does)
  bool truncate = true;
};

struct Fp8Config {
  bool enabled = false;        // quantization_config.quant_method == "fp8"
  int block_n = 128;           // weight_block_size[0] (output rows)
  int block_k = 128;           // weight_block_size[1] (input columns)
  bool ue8m0 = false;          // scale_fmt == "ue8m0": power-of-two activation/KV scales
  std::string activation_scheme = "dynamic";
};

struct ModelConfig {
  ModelFamily family = ModelFamily::kDeepseekV3;
  std::string model_type;  // as written in config.json

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;      // dense FFN
  int64_t moe_intermediate_size = 0;  // one routed expert
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;

  int64_t q_lora_rank = 0;  // 0 when config has null: plain q_proj (V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  int n_routed_experts = 0;  // 0 = no MoE layers
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int n_group = 1;
  int topk_group = 1;
  TopkMethod topk_method = TopkMethod::kGreedy;
  ScoringFunc scoring_func = ScoringFunc::kSoftmax;
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  int first_k_dense_replace = 0;
  int moe_layer_freq = 1;

  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 0;
  bool rope_interleave = true;  // MLA rope layout (HF's field; always true for released checkpoints)

  int num_nextn_predict_layers = 0;  // MTP modules stored at model.layers.{num_hidden_layers + i}

  // V3.2 lightning indexer (index_n_heads == 0 when absent).
  int index_n_heads = 0;
  int64_t index_head_dim = 0;
  int index_topk = 0;

  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;  // the first one when config has a list
  std::vector<int64_t> eos_token_ids;
  bool tie_word_embeddings = false;

  Fp8Config fp8;

  // ---- derived ----
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t kv_cache_dim() const { return kv_lora_rank + qk_rope_head_dim; }  // 576 for V2/V3 dims
  bool is_moe_layer(int layer) const {
    return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
  bool has_indexer() const { return index_n_heads > 0; }
  // Rotary inverse frequencies (qk_rope_head_dim / 2 of them) with YaRN applied when configured;
  // shared by MLA (interleaved pairs) and the V3.2 indexer (NeoX halves).
  std::vector<float> rope_inv_freq() const;
  // Multiplier on cos/sin (transformers' YaRN attention_factor; 1.0 for every released config).
  double rope_attention_factor() const;
  // Attention softmax scale: qk_head_dim^-0.5 * mscale(factor, mscale_all_dim)^2.
  double softmax_scale() const;
};

// Parses config.json text. Errors name the offending field (e.g. "config.json: field 'kv_lora_rank' ...").
Result<ModelConfig> parse_model_config(const std::string& json_text);
// Reads DIR/config.json.
Result<ModelConfig> load_model_config(const std::string& model_dir);

// Whether `other` describes the same model as `running` (every field the forward or the weight layout reads: sizes,
// routing, rope, norms, MTP, indexer, FP8 format; not the token ids): what an in-place weight update needs. The
// error names the first field that differs with both values.
Status check_same_architecture(const ModelConfig& running, const ModelConfig& other);

}  // namespace ds
