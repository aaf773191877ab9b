// DeepseekModel: the DeepSeek V2/V3/V3.2 forward pass (MLA + DeepSeekMoE + DSA indexer + MTP), written
// only in terms of ops/ops.h so that the CPU reference and the CUDA backend share one model.
#pragma once
#include <vector>

#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "ops/ops.h"

namespace ds {

// How MLA attends: MHA form (expand latents with kv_b_proj; prefill) or absorbed MQA form over the
// latent cache (decode). Both give the same result; kAuto picks MHA when any sequence adds more than one
// token and the absorbed form otherwise, as SGLang does.
enum class AttnMode { kAuto, kMha, kAbsorbed };

// Load-time choices of how the model runs (flags, environment), not what it computes.
struct ModelOptions {
  // The shared experts run as extra routed experts inside the grouped expert kernels (model/shared_fusion.h),
  // where every MoE layer's shared MLP cuts into n_shared_experts expert-sized parts. SGLang's default, not ours:
  // slower on the H200 at every batch (V2-Lite bench-one-batch, session 28: FP8 batch 1 / 8 / 64 1.89 / 4.52 /
  // 11.4 ms fused vs 1.84 / 4.28 / 7.95 apart; bf16 2.16 / 6.05 / 14.2 vs 2.14 / 5.78 / 9.51), and in bf16 the
  // shared output is rounded to bf16 with the routed rows instead of summed in fp32.
  bool shared_experts_fusion = false;
  // Apart, where the shared MLP forks to the side chain: before the router and the routing, or after them, so
  // that those latency-bound launches do not share their SMs' memory queues with its weight stream (session 29's
  // batch-1 CUDA trace: the routing ends 4.2 us after the router with the shared gate|up beside it, 11 us when
  // that GEMM starts sooner). kAuto: after them where the layer's input norm made x's FP8 quantization (the
  // shared chain then starts with its weight stream; no quant_act launch ahead of it), before them otherwise.
  // The same results either way: a schedule choice.
  enum class SharedFork { kAuto, kBeforeRoute, kAfterRoute };
  SharedFork shared_fork = SharedFork::kAuto;
  // Data-parallel attention (SGLang's --enable-dp-attention) over the backend's collective group: each rank
  // attends over its own sequences with whole attention weights and its own cache; the MLPs (sharded as tensor
  // parallelism shards them) run over every rank's tokens, gathered before and summed and scattered back after.
  // A rank with nothing to run calls forward with zero tokens (an idle step) so that the others' MLPs meet it.
  bool dp_attention = false;
  // V3.2 prefill attends in the absorbed MQA form over each token's top-k latent rows (sparse: at most index_topk
  // keys a token, 128 heads sharing each gathered row) once the batch's longest context reaches this many
  // positions; below it, in the MHA form over every position with the top-k as a mask (fewer FLOPs a key: dense
  // wins until the context is a few times index_topk). Measured on the device (H100, 4 layers of V3.2-Exp, session
  // 62 with the MHA kernel's faster loads): dense / sparse 0.120 / 0.127 s at 8K, 0.148 / 0.160 at 10K, 0.204 / 0.198
  // at 12K, 0.328 / 0.275 at 16K (BENCHMARKS.md, sessions 61-62).
  int64_t sparse_prefill_min_context = 12288;
  // The MHA-form prefill expands the context's latents with kv_b_proj into [rows, H, nope + v] (64 KiB a position
  // for V3's 128 heads in bf16: 8.6 GB at a 128K context) at most this many bytes at a time: past it, the context
  // is attended chunk by chunk and the parts merged by log-sum-exp (model/mha_chunks.h; SGLang's chunked prefix
  // attention). Not with the V3.2 indexer's top-k masks (its long prefills attend in the absorbed form).
  int64_t mha_chunk_bytes = int64_t{1} << 30;
};
// The options of a run: DSERVE_SHARED_EXPERTS_FUSION=1 turns the fusion on (A/B runs, tests) unless
// --disable-shared-experts-fusion (SGLang's flag, `disable_shared_experts_fusion`) is given;
// DSERVE_SHARED_AFTER_ROUTE=1 / =0 forces shared_fork after / before the routing (unset: kAuto);
// DSERVE_SPARSE_PREFILL_MIN_CONTEXT=n replaces sparse_prefill_min_context (A/B runs), DSERVE_MHA_CHUNK_BYTES=n
// mha_chunk_bytes (A/B runs, tests).
// --disable-chunked-prefix-cache (SGLang's flag) attends the whole context in one pass (mha_chunk_bytes unbounded).
ModelOptions model_options(bool disable_shared_experts_fusion, bool disable_chunked_prefix_cache = false);

class DeepseekModel {
 public:
  // Prepares (converts/uploads) every weight for `ops`' backend. `weights` may be released afterwards.
  DeepseekModel(const ModelConfig& cfg, const ModelWeights& weights, Ops& ops, const ModelOptions& options = {});

  const ModelConfig& config() const { return cfg_; }
  // Shared experts run as routed ones (ModelOptions::shared_experts_fusion, where the weights allow it).
  bool shared_experts_fused() const { return routing_.shared_experts > 0; }
  int num_mtp_layers() const { return static_cast<int>(mtp_.size()); }
  // Data-parallel attention (ModelOptions::dp_attention over a group of more than one rank): every rank makes the
  // same forward / mtp_forward calls in the same order, those with nothing to run with zero tokens.
  bool dp_attention() const { return dp_attention_; }
  // Bytes of one context position of the MHA prefill's kv_b_proj expansion ([H, nope + v] in `dtype`): the unit
  // ModelOptions::mha_chunk_bytes is divided by.
  static int64_t mha_row_bytes(const ModelConfig& cfg, DType dtype);

  // One forward step over a batch of new tokens: writes their latent (and indexer) rows into `cache` at
  // meta.slot_mapping, and returns the final hidden states after model.norm: [T, d].
  Tensor forward(const Tensor& token_ids /*[T] I32*/, const AttnMetadata& meta, KvCache& cache,
                 AttnMode mode = AttnMode::kAuto);
  // lm_head over selected hidden rows: [N, d] -> [N, vocab] fp32 logits.
  Tensor logits(const Tensor& hidden);
  // The same into `out` ([N, vocab] F32 on the backend): a CUDA graph's fixed output buffer, no copy after.
  void logits_into(const Tensor& hidden, Tensor& out);

  // MTP module `i`: slot t combines the main model's hidden state h_t (after model.norm) with the
  // embedding of the token that follows position t (next_ids[t]); attention uses the MTP layer's own cache
  // layer (index num_hidden_layers + i) at meta's positions/slots. Returns z [T, d] (before
  // shared_head.norm); mtp_logits gives the draft logits.
  Tensor mtp_forward(int i, const Tensor& next_ids /*[T] I32*/, const Tensor& hidden /*[T, d]*/,
                     const AttnMetadata& meta, KvCache& cache, AttnMode mode = AttnMode::kAuto);
  Tensor mtp_logits(int i, const Tensor& z) { return mtp_head(i, mtp_norm(i, z)); }
  // The two halves of mtp_logits: shared_head.norm(z) (also what a further draft step takes as its hidden, as
  // SGLang's EAGLE drafting does), then shared_head.head: [T, d] -> [T, vocab] fp32.
  Tensor mtp_norm(int i, const Tensor& z);
  Tensor mtp_head(int i, const Tensor& zn);

  // /update_weights_from_disk: every prepared weight takes the values of `w` (a checkpoint of the same config,
  // loaded and quantized as this model's was), in place: the backend memory (and so CUDA graphs, tensor maps and
  // expert tables) stays. One layer is prepared at a time beside the model. Errors: a tensor prepared in another
  // shape or format (the layers before it are then already updated).
  Status update_weights(const ModelWeights& w);

  // SGLang's expert distribution recorder (stat mode): from now on every forward adds, for each MoE layer l of the
  // main model (not the MTP layers), how many of its real tokens' picks went to each routed expert into
  // expert_counts() [num_hidden_layers, n_routed_experts] I32 on the backend (zeroed here; dense layers' rows stay
  // 0). Call before capturing CUDA graphs (their padded rows are left out through AttnMetadata::real_rows).
  void enable_expert_counts();
  Tensor& expert_counts() { return expert_counts_; }
  // SGLang's return_routed_experts: from now on every forward of the main model writes each token's routed picks
  // (top_k logical expert ids a MoE layer, 0 for dense layers) into routed_ids(T) [T, num_hidden_layers * top_k] I32
  // on the backend: rows [0, T) of a buffer of `capacity` rows made here (before CUDA graphs are captured: they write
  // it too), or of a fresh one for a larger forward (eager). Valid until the next forward (or graph replay).
  void enable_routed_capture(int64_t capacity);
  bool routed_capture() const { return routed_.defined(); }
  Tensor routed_ids(int64_t T) const { return T <= routed_.dim(0) ? routed_.rows(0, T) : routed_big_.rows(0, T); }

 private:
  struct Attention {
    LinearWeight q_proj, q_a_proj, q_b_proj, kv_a_proj, kv_b_proj, o_proj;
    Tensor q_a_norm, kv_a_norm;
    Tensor w_kc;  // [H, nope, kv_lora]
    Tensor w_vc;  // [H, kv_lora, v]
    HeadsFp8 w_kc8;  // [H, kv_lora, nope] e4m3 instead of w_kc / w_vc where the backend takes them
    HeadsFp8 w_vc8;  // [H, v, kv_lora]
    // V3.2 indexer
    bool has_indexer = false;
    LinearWeight idx_wq_b, idx_wk, idx_weights_proj;
    Tensor idx_k_norm_w, idx_k_norm_b;
  };
  struct Layer {
    Tensor input_norm, post_attn_norm;
    Attention attn;
    bool is_moe = false;
    int counted = -1;  // its row of expert_counts_ (main layers), -1 for the MTP layers
    PreparedMlp dense;
    Tensor router;  // [E, d] fp32 on the device
    Tensor correction_bias;
    std::vector<PreparedMlp> experts;  // routed, then (fused) the shared MLP's parts
    bool has_shared = false;           // a shared MLP run apart
    PreparedMlp shared;
  };
  struct Mtp {
    Tensor enorm, hnorm, shared_head_norm, embed;
    LinearWeight eh_proj, shared_head;
    Layer layer;
  };

  Layer prepare_layer(const LayerWeights& w);
  Status update_layer(Layer& dst, const Layer& src);  // (update_weights; model/weight_update.cpp)
  // hidden [T, d] -> hidden after one decoder layer; `cache_layer` indexes cache.latent / cache.index_k.
  Tensor decoder_layer(const Layer& layer, int cache_layer, Tensor hidden, const AttnMetadata& meta,
                       KvCache& cache, AttnMode mode);
  // The layer without its final residual add: returns the MLP output (maybe unreduced: MlpOut, ops.h) for the
  // caller (the next layer's input norm) to add to `hidden`; `pending` is the previous layer's, or undefined.
  MlpOut decoder_layer_open(const Layer& layer, int cache_layer, Tensor& hidden, const MlpOut& pending,
                            const AttnMetadata& meta, KvCache& cache, AttnMode mode);
  Tensor attention(const Attention& a, int cache_layer, const Tensor& x, const Fp8Act& xq, const AttnMetadata& meta,
                   KvCache& cache, AttnMode mode);
  Tensor indexer(const Attention& a, int cache_layer, const Tensor& x, const Tensor& q_resid,
                 const AttnMetadata& meta, KvCache& cache);
  // The step's MHA context chunks (mha_chunks_; cleared where one pass fits ModelOptions::mha_chunk_bytes), planned
  // once a forward / mtp_forward for all its layers.
  void plan_mha_chunks_for(const AttnMetadata& meta, AttnMode mode);
  // MHA-form attention chunk by chunk over ctx [S, lora + rope] (the gathered context): [T, H, v].
  Tensor mha_chunked(const Attention& a, const Tensor& q3, const Tensor& ctx);
  MlpOut mlp(const Layer& layer, const Tensor& x, const Fp8Act& xq);
  // Data-parallel attention: the MLP of every rank's tokens (x: this rank's [T, d], undefined when idle); returns
  // this rank's rows of the summed output (undefined when idle).
  Tensor dp_mlp(const Layer& layer, const Tensor& x);
  // Data-parallel attention: each rank's token count this step (one all-reduce), and this rank's first row.
  void dp_exchange_counts(int64_t tokens);

  ModelConfig cfg_;
  Ops& ops_;
  Tensor embed_, final_norm_;
  LinearWeight lm_head_;
  std::vector<Layer> layers_;
  std::vector<Mtp> mtp_;
  Tensor inv_freq_;  // [rope_dim / 2] F32 on the device
  float rope_factor_ = 1.0f;
  float softmax_scale_ = 1.0f;
  MoeRouting routing_;
  Tensor expert_counts_;    // [num_hidden_layers, n_routed_experts] I32 (enable_expert_counts), else undefined
  Tensor count_real_rows_;  // this forward's AttnMetadata::real_rows (for mlp's counts)
  Tensor routed_;           // [capacity, num_hidden_layers * top_k] I32 (enable_routed_capture), else undefined
  Tensor routed_big_;       // a forward's beyond the capacity
  Tensor routed_out_;       // where this forward records (rows of routed_ or routed_big_)
  ModelOptions::SharedFork shared_fork_ = ModelOptions::SharedFork::kAuto;
  bool dp_attention_ = false;
  int64_t sparse_prefill_min_context_ = 0;
  int64_t mha_chunk_bytes_ = 0;
  struct MhaChunkRun {
    AttnMetadata meta;  // the chunk's seq_lens and shifted positions; the step's q_starts
    Tensor rows;        // [rows] I32: its rows of the gathered context
  };
  std::vector<MhaChunkRun> mha_chunks_;
  std::vector<int64_t> dp_counts_;  // tokens per rank this step (data-parallel attention)
  int64_t dp_offset_ = 0, dp_total_ = 0;
};

}  // namespace ds
