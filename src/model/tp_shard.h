// Tensor-parallel sharding of a checkpoint (SGLang's MLA + MoE TP layout): rank r of n gets heads
// [r H/n, (r+1) H/n) (q_proj / q_b_proj and kv_b_proj rows, o_proj columns) and a 1/n slice of every MLP's
// intermediate dimension (dense, shared and each routed expert: gate / up rows, down columns). The low-rank
// q_a / kv_a projections (so the latent cache is whole on every rank), norms, router, V3.2 indexer, MTP's
// eh_proj, embedding and lm_head stay whole. Each rank's attention output and MLP output are then partial sums
// that the model all-reduces (Ops::all_reduce_).
#pragma once
#include "core/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace ds {

struct TpShard {
  ModelConfig config;    // heads and intermediate sizes divided by n: what this rank's model computes
  ModelWeights weights;  // whole tensors shared with the input (no copy); sliced ones copied
};

// Errors name what does not divide: heads, an intermediate size, or a block-FP8 slice off the 128-blocks.
// expert_parallel (SGLang's --ep-size = --tp-size): the routed experts are not cut but dealt out whole, rank r
// keeping experts [r E/n, (r+1) E/n) (the others' weights undefined: the MoE op skips them, their owners add
// them in the all-reduce); the shared experts are still cut along their intermediate dimension.
// The divisibility the sharding needs, from the config alone (heads unless attention_whole, routed experts with
// expert_parallel); shard_for_tensor_parallel checks it too.
Status check_tensor_parallel(const ModelConfig& cfg, int size, bool expert_parallel, bool attention_whole);

// What one rank computes (heads and intermediate sizes divided by `size`), from the config alone: errors name an
// extent that does not divide; with fp8_blocks (no checkpoint whose slices say it: dummy weights, made per rank from
// this config as SGLang's --load-format dummy initialises each rank's own shard), also a block-FP8 config's slice
// that is not whole 128-blocks.
Result<ModelConfig> tensor_parallel_config(const ModelConfig& cfg, int size, bool expert_parallel,
                                           bool attention_whole, bool fp8_blocks = false);

// attention_whole (data-parallel attention, ModelOptions::dp_attention): the attention weights stay whole on every
// rank; only the MLPs are sharded.
Result<TpShard> shard_for_tensor_parallel(const ModelConfig& cfg, const ModelWeights& w, int rank, int size,
                                          bool expert_parallel = false, bool attention_whole = false);

}  // namespace ds
