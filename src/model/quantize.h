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

// Validates --quantization: "" / "none" leaves the model as stored, "fp8" quantizes BF16 linears.
Status apply_quantization_flag(const std::string& value, ModelWeights* w, ModelConfig* cfg);

}  // namespace ds
