// --quantization fp8: block-quantizes a BF16 checkpoint's linears at load time into DeepSeek's FP8 format
// (the same tensors DeepSeek's own FP8 checkpoints quantize; embeddings, heads, norms, routers stay).
#pragma once
#include <string>

#include "core/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace ds {

// Quantizes every not-yet-FP8 attention linear (incl. the V3.2 indexer's wq_b / wk), dense MLP, routed
// and shared expert of the main layers and MTP layers; sets cfg->fp8 (enabled, 128x128 blocks).
void quantize_weights_fp8(ModelWeights* w, ModelConfig* cfg);

// The config dummy weights are made for under `quantization`: with "fp8" on a BF16 config (not a ue8m0 one, whose
// quantized scales are powers of two) the block-FP8 layout directly (what quantizing random bf16 weights would give,
// minus minutes of e4m3 encoding per full-size model; apply_quantization_flag then finds nothing left to do).
ModelConfig dummy_weights_config(const ModelConfig& cfg, const std::string& quantization);

// Validates --quantization: "" / "none" leaves the model as stored, "fp8" quantizes BF16 linears.
Status apply_quantization_flag(const std::string& value, ModelWeights* w, ModelConfig* cfg);

}  // namespace ds
