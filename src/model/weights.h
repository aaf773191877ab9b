// ModelWeights: every checkpoint tensor of a DeepSeek model, grouped by layer, exactly as stored
// (dtype from the safetensors header; block-FP8 linears keep their weight_scale_inv). Backends convert
// these raw host tensors into their own layouts (see ops/ops.h prepare_*).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/config.h"
#include "ops/linear_weight.h"

namespace ds {

struct MlpWeights {  // SiLU-gated MLP: down(silu(gate x) * up x)
  LinearWeight gate;  // [inter, d]
  LinearWeight up;    // [inter, d]
  LinearWeight down;  // [d, inter]
};

struct AttentionWeights {
  LinearWeight q_proj;      // [H * qk_head_dim, d]        when q_lora_rank == 0
  LinearWeight q_a_proj;    // [q_lora_rank, d]            when q_lora_rank > 0
  Tensor q_a_norm;          // [q_lora_rank]
  LinearWeight q_b_proj;    // [H * qk_head_dim, q_lora_rank]
  LinearWeight kv_a_proj;   // [kv_lora_rank + qk_rope_head_dim, d]  (kv_a_proj_with_mqa)
  Tensor kv_a_norm;         // [kv_lora_rank]
  LinearWeight kv_b_proj;   // [H * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
  LinearWeight o_proj;      // [d, H * v_head_dim]
};

struct IndexerWeights {     // V3.2 lightning indexer (self_attn.indexer.*)
  LinearWeight wq_b;        // [index_n_heads * index_head_dim, q_lora_rank]
  LinearWeight wk;          // [index_head_dim, d]
  Tensor k_norm_weight;     // [index_head_dim]  LayerNorm
  Tensor k_norm_bias;       // [index_head_dim]
  LinearWeight weights_proj;  // [index_n_heads, d]
  bool defined() const { return wq_b.defined(); }
};

struct MoeWeights {
  Tensor router;            // [E, d] (mlp.gate.weight)
  Tensor correction_bias;   // [E] F32 (mlp.gate.e_score_correction_bias), undefined for V2
  std::vector<MlpWeights> experts;  // E of them, each [moe_inter, d] / [d, moe_inter]
  MlpWeights shared;        // [n_shared * moe_inter, d]; undefined when n_shared_experts == 0
};

struct LayerWeights {
  Tensor input_norm;        // [d]
  Tensor post_attn_norm;    // [d]
  AttentionWeights attn;
  IndexerWeights indexer;   // V3.2 only
  bool is_moe = false;
  MlpWeights dense;         // when !is_moe
  MoeWeights moe;           // when is_moe
};

// One MTP (NextN) module, stored at model.layers.{num_hidden_layers + i}.
struct MtpWeights {
  Tensor enorm;             // [d]
  Tensor hnorm;             // [d]
  LinearWeight eh_proj;     // [d, 2d]
  LayerWeights layer;       // a full decoder layer (MoE for V3)
  Tensor shared_head_norm;  // [d]
  LinearWeight shared_head; // [vocab, d]; falls back to lm_head when not stored
  Tensor embed;             // [vocab, d]; falls back to the main embedding when not stored
};

struct ModelWeights {
  Tensor embed;             // [vocab, d]
  Tensor final_norm;        // [d]
  LinearWeight lm_head;     // [vocab, d]
  std::vector<LayerWeights> layers;
  std::vector<MtpWeights> mtp;  // empty when the checkpoint has no MTP tensors
};

struct LoadOptions {
  bool load_mtp = true;     // load model.layers.{L}.* when present
};

// Loads DIR/*.safetensors (single file or sharded via model.safetensors.index.json), mmapped.
// Every tensor is validated against the config; errors name the tensor and the file.
Result<ModelWeights> load_weights(const std::string& model_dir, const ModelConfig& cfg,
                                  const LoadOptions& opts = {});

// `--load-format dummy`: seeded random weights of the right shapes. Linears are BF16, or block-FP8
// with scales when cfg.fp8.enabled; norms are 1 + small noise; router bias F32.
ModelWeights make_dummy_weights(const ModelConfig& cfg, uint64_t seed, bool with_mtp = true);

}  // namespace ds
