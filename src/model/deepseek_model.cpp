// The DeepSeek forward pass in terms of ops: embedding -> decoder layers (MLA + dense/MoE FFN, pre-norm
// residual) -> final norm -> lm_head, plus the V3.2 indexer and the MTP module.
#include "model/deepseek_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/env.h"
#include "model/mha_chunks.h"
#include "model/shared_fusion.h"

namespace ds {
namespace {
const LinearWeight kNone;  // "no consumer" for norms whose output feeds no block-FP8 linear
}  // namespace

Result<KvCacheDtype> parse_kv_cache_dtype(const std::string& name) {
  if (name == "auto") return KvCacheDtype::kAuto;
  if (name == "bf16" || name == "bfloat16") return KvCacheDtype::kBf16;
  if (name == "fp8_e4m3") return KvCacheDtype::kFp8E4M3;
  if (name == "fp8_e5m2") return KvCacheDtype::kFp8E5M2;
  return error("--kv-cache-dtype must be auto, bf16, fp8_e4m3 or fp8_e5m2, got '", name, "'");
}

KvCache make_kv_cache(Ops& ops, const ModelConfig& cfg, int page_size, int num_pages, int num_mtp_layers,
                      KvCacheDtype dtype) {
  KvCache c;
  c.page_size = page_size;
  c.num_pages = num_pages;
  c.dtype = dtype;
  const int layers = cfg.num_hidden_layers + num_mtp_layers;
  for (int l = 0; l < layers; ++l) {
    // NaN-poisoned: a read of a slot that was never written shows up in the output.
    c.latent.push_back(ops.empty_latent_cache(c.num_slots(), cfg.kv_lora_rank, cfg.qk_rope_head_dim, dtype));
    if (cfg.has_indexer()) {
      c.index_k.push_back(ops.empty({c.num_slots(), cfg.index_head_dim}, ops.activation_dtype()));
      ops.fill(c.index_k.back(), std::numeric_limits<float>::quiet_NaN());
    }
  }
  return c;
}

ModelOptions model_options(bool disable_shared_experts_fusion, bool disable_chunked_prefix_cache) {
  ModelOptions o;
  o.shared_experts_fusion = !disable_shared_experts_fusion && env_flag("DSERVE_SHARED_EXPERTS_FUSION", false);
  if (env_text("DSERVE_SHARED_AFTER_ROUTE"))
    o.shared_fork = env_flag("DSERVE_SHARED_AFTER_ROUTE", false) ? ModelOptions::SharedFork::kAfterRoute
                                                                  : ModelOptions::SharedFork::kBeforeRoute;
  o.sparse_prefill_min_context = env_int("DSERVE_SPARSE_PREFILL_MIN_CONTEXT", o.sparse_prefill_min_context);
  o.mha_chunk_bytes = disable_chunked_prefix_cache ? INT64_MAX : env_int("DSERVE_MHA_CHUNK_BYTES", o.mha_chunk_bytes);
  return o;
}

DeepseekModel::DeepseekModel(const ModelConfig& cfg, const ModelWeights& w, Ops& ops, const ModelOptions& options)
    : cfg_(cfg), ops_(ops), shared_fork_(options.shared_fork), dp_attention_(options.dp_attention && ops.tp_size() > 1),
      sparse_prefill_min_context_(options.sparse_prefill_min_context), mha_chunk_bytes_(options.mha_chunk_bytes) {
  DS_CHECK(mha_chunk_bytes_ > 0, "mha_chunk_bytes ", mha_chunk_bytes_);
  // Shared-experts fusion for every MoE layer (one routing for all of them) or none.
  bool fuse = options.shared_experts_fusion && cfg_.n_shared_experts > 0;
  bool any_moe = false;
  const auto check = [&](const LayerWeights& lw) {
    if (!lw.is_moe) return;
    any_moe = true;
    fuse = fuse && can_split_shared(lw.moe, cfg_.n_shared_experts);
    for (const MlpWeights& e : lw.moe.experts) fuse = fuse && e.gate.defined();  // expert parallelism: not with it
  };
  for (const LayerWeights& lw : w.layers) check(lw);
  for (const MtpWeights& mw : w.mtp) check(mw.layer);
  routing_.shared_experts = fuse && any_moe ? cfg_.n_shared_experts : 0;
  embed_ = ops_.prepare_param(w.embed);
  final_norm_ = ops_.prepare_param(w.final_norm);
  lm_head_ = ops_.prepare_linear(w.lm_head);
  for (const LayerWeights& lw : w.layers) layers_.push_back(prepare_layer(lw));
  for (size_t l = 0; l < layers_.size(); ++l) layers_[l].counted = static_cast<int>(l);
  for (const MtpWeights& mw : w.mtp) {
    Mtp m;
    m.enorm = ops_.prepare_param(mw.enorm);
    m.hnorm = ops_.prepare_param(mw.hnorm);
    m.shared_head_norm = ops_.prepare_param(mw.shared_head_norm);
    m.embed = mw.embed.defined() ? ops_.prepare_param(mw.embed) : embed_;
    m.eh_proj = ops_.prepare_linear(mw.eh_proj);
    m.shared_head = mw.shared_head.defined() ? ops_.prepare_linear(mw.shared_head) : lm_head_;
    m.layer = prepare_layer(mw.layer);
    mtp_.push_back(std::move(m));
  }
  std::vector<float> inv = cfg_.rope_inv_freq();
  Tensor host = Tensor::empty({static_cast<int64_t>(inv.size())}, DType::kF32);
  std::copy(inv.begin(), inv.end(), host.f32());
  inv_freq_ = ops_.upload(host);
  rope_factor_ = static_cast<float>(cfg_.rope_attention_factor());
  softmax_scale_ = static_cast<float>(cfg_.softmax_scale());

  routing_.method = cfg_.topk_method == TopkMethod::kGreedy               ? MoeRouting::Method::kGreedy
                    : cfg_.topk_method == TopkMethod::kGroupLimitedGreedy ? MoeRouting::Method::kGroupLimitedGreedy
                                                                          : MoeRouting::Method::kNoauxTc;
  routing_.sigmoid = cfg_.scoring_func == ScoringFunc::kSigmoid;
  routing_.num_experts = cfg_.n_routed_experts;
  routing_.top_k = cfg_.num_experts_per_tok;
  routing_.n_group = cfg_.n_group;
  routing_.topk_group = cfg_.topk_group;
  routing_.norm_topk_prob = cfg_.norm_topk_prob;
  routing_.routed_scaling_factor = static_cast<float>(cfg_.routed_scaling_factor);
}

DeepseekModel::Layer DeepseekModel::prepare_layer(const LayerWeights& w) {
  Layer l;
  l.input_norm = ops_.prepare_param(w.input_norm);
  l.post_attn_norm = ops_.prepare_param(w.post_attn_norm);
  Attention& a = l.attn;
  if (cfg_.q_lora_rank > 0) {
    a.q_a_proj = ops_.prepare_linear(w.attn.q_a_proj);
    a.q_a_norm = ops_.prepare_param(w.attn.q_a_norm);
    a.q_b_proj = ops_.prepare_linear(w.attn.q_b_proj);
  } else {
    a.q_proj = ops_.prepare_linear(w.attn.q_proj);
  }
  a.kv_a_proj = ops_.prepare_linear(w.attn.kv_a_proj);
  a.kv_a_norm = ops_.prepare_param(w.attn.kv_a_norm);
  a.kv_b_proj = ops_.prepare_linear(w.attn.kv_b_proj);
  a.o_proj = ops_.prepare_linear(w.attn.o_proj);
  if (!ops_.prepare_absorbed_fp8(w.attn.kv_b_proj, cfg_.num_attention_heads, cfg_.qk_nope_head_dim, cfg_.v_head_dim,
                                 &a.w_kc8, &a.w_vc8))
    ops_.prepare_absorbed(w.attn.kv_b_proj, cfg_.num_attention_heads, cfg_.qk_nope_head_dim, cfg_.v_head_dim,
                          &a.w_kc, &a.w_vc);
  if (cfg_.has_indexer()) {
    DS_CHECK(w.indexer.defined(), "V3.2 layer without indexer weights");
    a.has_indexer = true;
    a.idx_wq_b = ops_.prepare_linear(w.indexer.wq_b);
    a.idx_wk = ops_.prepare_linear(w.indexer.wk);
    a.idx_weights_proj = ops_.prepare_linear(w.indexer.weights_proj);
    a.idx_k_norm_w = ops_.prepare_param(w.indexer.k_norm_weight);
    a.idx_k_norm_b = ops_.prepare_param(w.indexer.k_norm_bias);
  }
  l.is_moe = w.is_moe;
  if (!w.is_moe) {
    l.dense = ops_.prepare_mlp(w.dense.gate, w.dense.up, w.dense.down);
  } else {
    l.router = ops_.prepare_param(w.moe.router);
    if (w.moe.correction_bias.defined()) l.correction_bias = ops_.prepare_param(w.moe.correction_bias);
    // (Expert parallelism: another rank's experts stay undefined here; the MoE op skips tokens' picks of them.)
    for (const MlpWeights& e : w.moe.experts)
      l.experts.push_back(e.gate.defined() ? ops_.prepare_mlp(e.gate, e.up, e.down) : PreparedMlp{});
    if (routing_.shared_experts > 0) {
      for (const MlpWeights& e : split_shared(w.moe, routing_.shared_experts))
        l.experts.push_back(ops_.prepare_mlp(e.gate, e.up, e.down));
    } else {
      l.has_shared = w.moe.shared.gate.defined();
      if (l.has_shared) l.shared = ops_.prepare_mlp(w.moe.shared.gate, w.moe.shared.up, w.moe.shared.down);
    }
  }
  return l;
}

void DeepseekModel::dp_exchange_counts(int64_t tokens) {
  const int n = ops_.tp_size();
  Tensor c = Tensor::zeros({n}, DType::kF32);
  c.f32()[ops_.tp_rank()] = static_cast<float>(tokens);  // exact: token counts are far below 2^24
  Tensor d = ops_.upload(c);
  ops_.all_reduce_(d);
  Tensor h = ops_.to_host(d);
  dp_counts_.assign(n, 0);
  dp_offset_ = dp_total_ = 0;
  for (int r = 0; r < n; ++r) {
    dp_counts_[r] = static_cast<int64_t>(h.f32()[r]);
    if (r < ops_.tp_rank()) dp_offset_ += dp_counts_[r];
    dp_total_ += dp_counts_[r];
  }
}

Tensor DeepseekModel::dp_mlp(const Layer& layer, const Tensor& x) {
  const int64_t T = dp_counts_[ops_.tp_rank()], d = cfg_.hidden_size;
  if (dp_total_ == 0) return Tensor();
  // Gather by summing: every rank's rows placed in zeros elsewhere (the one collective the group has).
  Tensor all = ops_.empty({dp_total_, d}, ops_.activation_dtype());  // [T_all, d]
  ops_.fill(all, 0.0f);
  if (T > 0) {
    Tensor mine = all.rows(dp_offset_, dp_offset_ + T);
    ops_.add_(mine, x);
  }
  ops_.all_reduce_(all);
  Tensor sum = ops_.reduce(mlp(layer, all, Fp8Act{}));  // [T_all, d], this rank's shard of every token's MLP
  ops_.all_reduce_(sum);
  return T > 0 ? sum.rows(dp_offset_, dp_offset_ + T) : Tensor();  // [T, d]
}

Tensor DeepseekModel::forward(const Tensor& token_ids, const AttnMetadata& meta, KvCache& cache, AttnMode mode) {
  DS_CHECK(token_ids.numel() == meta.num_tokens, "token count ", token_ids.numel(), " vs metadata ", meta.num_tokens);
  if (dp_attention_) {
    dp_exchange_counts(token_ids.numel());
    if (token_ids.numel() == 0) {  // an idle rank: only the MLPs' collectives, over the others' tokens
      routed_out_ = Tensor();      // (nothing of its own to record)
      for (int l = 0; l < cfg_.num_hidden_layers; ++l) (void)dp_mlp(layers_[l], Tensor());
      return Tensor();
    }
  }
  plan_mha_chunks_for(meta, mode);
  count_real_rows_ = meta.real_rows;
  if (routed_.defined()) {
    const int64_t T = token_ids.numel();
    if (T > routed_.dim(0)) {  // (eager only: graphs are captured within the capacity)
      routed_big_ = ops_.empty({T, routed_.dim(1)}, DType::kI32);
      ops_.zero_(routed_big_);  // dense layers' columns stay 0
    }
    routed_out_ = routed_ids(T);
  }
  Tensor h = ops_.embedding(embed_, token_ids);  // [T, d] residual stream
  MlpOut pending;  // [T, d] the previous layer's MLP output, added by the next norm (one kernel fewer per layer)
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) pending = decoder_layer_open(layers_[l], l, h, pending, meta, cache, mode);
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  Fp8Act unused;
  Tensor out = pending.defined() ? ops_.rms_norm_q_open(h, pending, final_norm_, eps, kNone, &unused)
                                 : ops_.rms_norm(h, final_norm_, eps);  // [T, d]
  ops_.side_flush();
  return out;
}

void DeepseekModel::enable_expert_counts() {
  if (expert_counts_.defined()) return;
  expert_counts_ = ops_.empty({cfg_.num_hidden_layers, std::max<int64_t>(cfg_.n_routed_experts, 1)}, DType::kI32);
  ops_.zero_(expert_counts_);
}

void DeepseekModel::enable_routed_capture(int64_t capacity) {
  if (routed_.defined()) return;
  routed_ = ops_.empty({std::max<int64_t>(capacity, 1), cfg_.num_hidden_layers * int64_t{cfg_.num_experts_per_tok}},
                       DType::kI32);
  ops_.zero_(routed_);  // dense layers' columns are never written
}

// fp32 logits whatever the activation dtype (a bf16 logit of magnitude 10 is off by up to 0.03).
Tensor DeepseekModel::logits(const Tensor& hidden) { return ops_.linear_f32(hidden, lm_head_.weight); }  // [N, vocab]
void DeepseekModel::logits_into(const Tensor& hidden, Tensor& out) { ops_.linear_f32_into(hidden, lm_head_.weight, out); }

Tensor DeepseekModel::mtp_forward(int i, const Tensor& next_ids, const Tensor& hidden, const AttnMetadata& meta,
                                  KvCache& cache, AttnMode mode) {
  DS_CHECK(i >= 0 && i < num_mtp_layers(), "MTP module ", i, " not loaded");
  const Mtp& m = mtp_[i];
  if (dp_attention_) {  // the MTP layer's MLP meets the other ranks' as the main layers' do (forward)
    DS_CHECK(next_ids.numel() == meta.num_tokens, "MTP token count ", next_ids.numel(), " vs metadata ", meta.num_tokens);
    dp_exchange_counts(next_ids.numel());
    if (next_ids.numel() == 0) {
      (void)dp_mlp(m.layer, Tensor());
      return Tensor();
    }
  }
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  plan_mha_chunks_for(meta, mode);
  Tensor e = ops_.embedding(m.embed, next_ids);                        // [T, d]
  Tensor eh = ops_.concat_cols(ops_.rms_norm(e, m.enorm, eps),         // embedding first, then hidden
                               ops_.rms_norm(hidden, m.hnorm, eps));   // [T, 2d]
  Tensor x = ops_.linear(eh, m.eh_proj);                               // [T, d]
  return decoder_layer(m.layer, cfg_.num_hidden_layers + i, x, meta, cache, mode);
}

Tensor DeepseekModel::mtp_norm(int i, const Tensor& z) {
  DS_CHECK(i >= 0 && i < num_mtp_layers(), "MTP module ", i, " not loaded");
  return ops_.rms_norm(z, mtp_[i].shared_head_norm, static_cast<float>(cfg_.rms_norm_eps));  // [T, d]
}

Tensor DeepseekModel::mtp_head(int i, const Tensor& zn) {
  DS_CHECK(i >= 0 && i < num_mtp_layers(), "MTP module ", i, " not loaded");
  return ops_.linear_f32(zn, mtp_[i].shared_head.weight);  // [T, vocab]
}

Tensor DeepseekModel::decoder_layer(const Layer& layer, int cache_layer, Tensor hidden, const AttnMetadata& meta,
                                    KvCache& cache, AttnMode mode) {
  ops_.add_(hidden, ops_.reduce(decoder_layer_open(layer, cache_layer, hidden, MlpOut(), meta, cache, mode)));
  ops_.side_flush();
  return hidden;
}

MlpOut DeepseekModel::decoder_layer_open(const Layer& layer, int cache_layer, Tensor& hidden, const MlpOut& pending,
                                         const AttnMetadata& meta, KvCache& cache, AttnMode mode) {
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  // `hidden` is the residual stream [T, d], updated in place; `pending` (the previous layer's MLP output, or
  // undefined) is added to it by this layer's input norm.
  // Each norm's output may come with its FP8 quantization for the block-FP8 projections that read it (xq;
  // undefined unless the backend fused it: see Ops::rms_norm_q).
  Fp8Act xq;
  const LinearWeight& q_first = cfg_.q_lora_rank > 0 ? layer.attn.q_a_proj : layer.attn.q_proj;
  Tensor x = pending.defined() ? ops_.rms_norm_q_open(hidden, pending, layer.input_norm, eps, q_first, &xq)  // hidden += pending
                               : ops_.rms_norm_q(nullptr, hidden, layer.input_norm, eps, q_first, &xq);   // [T, d]
  Tensor a = attention(layer.attn, cache_layer, x, xq, meta, cache, mode);    // [T, d]
  const LinearWeight& mlp_first = !layer.is_moe         ? layer.dense.gate_up
                                  : layer.has_shared     ? layer.shared.gate_up
                                  : layer.experts.empty() ? kNone
                                                         : layer.experts[0].gate_up;
  x = ops_.rms_norm_q(&hidden, a, layer.post_attn_norm, eps, mlp_first, &xq);  // hidden += a; [T, d]
  if (dp_attention_) return MlpOut{dp_mlp(layer, x), nullptr};  // [T, d]: every rank's tokens' MLP, this rank's rows
  MlpOut m = mlp(layer, x, xq);                                                // [T, d], not yet added
  if (ops_.tp_size() == 1) return m;
  // Tensor parallelism: this rank's intermediate columns give a partial sum, completed before the residual add.
  Tensor sum = ops_.reduce(m);  // [T, d]
  ops_.all_reduce_(sum);
  return MlpOut{sum, nullptr};
}

Tensor DeepseekModel::attention(const Attention& a, int cache_layer, const Tensor& x, const Fp8Act& xq,
                                const AttnMetadata& meta, KvCache& cache, AttnMode mode) {
  const int64_t T = x.dim(0), H = cfg_.num_attention_heads;
  const int64_t nope = cfg_.qk_nope_head_dim, rope = cfg_.qk_rope_head_dim, dqk = nope + rope;
  const int64_t v = cfg_.v_head_dim, lora = cfg_.kv_lora_rank;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  // Query [T, H, nope + rope] and the latent KV row [c (lora) | k_pe (rope)]; the two projections of x run as
  // one pair (one launch at decode sizes).
  Tensor q, q_resid, kv_a;  // kv_a: [T, lora + rope]
  if (cfg_.q_lora_rank > 0) {
    Tensor q_a;
    ops_.linear_pair_q(x, xq, a.q_a_proj, a.kv_a_proj, &q_a, &kv_a);  // [T, q_lora_rank]
    q_resid = ops_.rms_norm(q_a, a.q_a_norm, eps);                // [T, q_lora_rank]
    q = ops_.linear(q_resid, a.q_b_proj);                         // [T, H * dqk]
  } else {
    ops_.linear_pair_q(x, xq, a.q_proj, a.kv_a_proj, &q, &kv_a);  // [T, H * dqk]
  }
  Tensor q3 = q.reshape({T, H, dqk});  // rope part not rotated yet: each attention form below does it

  if (mode == AttnMode::kAuto) {
    const bool sparse_prefill = a.has_indexer && meta.max_seq_len >= sparse_prefill_min_context_;
    mode = meta.max_q_len > 1 && !sparse_prefill ? AttnMode::kMha : AttnMode::kAbsorbed;
  }
  // Latent KV row [normalised c | rotated k_pe] written to the cache, beside the query's rope and absorption
  // (independent until attention reads the cache: joined right before that). The absorbed form with bf16 w_kc
  // hands both to one op (one launch at decode sizes on CUDA).
  const bool store_with_q = mode == AttnMode::kAbsorbed && !a.w_kc8.defined();
  if (!store_with_q) {
    ops_.side_begin();
    ops_.mla_store_latent(kv_a, a.kv_a_norm, eps, meta.positions, inv_freq_, rope_factor_, cache.latent[cache_layer],
                          meta.slot_mapping, cache.dtype);
    ops_.side_end();
  }

  Tensor topk;  // [T, index_topk] (V3.2): the context positions each query may attend
  if (a.has_indexer) topk = indexer(a, cache_layer, x, q_resid, meta, cache);
  const Tensor* topk_ptr = a.has_indexer ? &topk : nullptr;

  Tensor o;    // [T, H, v]
  Fp8Act oq;  // o's quantization for o_proj, where the attention's tail makes it
  if (mode == AttnMode::kMha) {
    ops_.rope_(q3, nope, rope, meta.positions, inv_freq_, rope_factor_, RopeStyle::kInterleaved);
    ops_.side_join();
    Tensor ctx = ops_.gather_latent_context(cache.latent[cache_layer], meta, lora, cache.dtype);  // [S, lora + rope]
    if (!mha_chunks_.empty() && !topk_ptr) {
      o = mha_chunked(a, q3, ctx);  // [T, H, v]
    } else {
      const int64_t S = ctx.dim(0);
      Tensor kv = ops_.linear(ops_.slice_cols(ctx, 0, lora), a.kv_b_proj).reshape({S, H, nope + v});  // [S, H, nope + v]
      o = ops_.mla_attention_mha(q3, kv, ctx, lora, meta, softmax_scale_, topk_ptr, nullptr);  // [T, H, v]
    }
  } else if (store_with_q) {
    Tensor q_abs = ops_.mla_store_absorb_q(kv_a, a.kv_a_norm, eps, cache.latent[cache_layer], meta.slot_mapping,
                                           cache.dtype, q3, a.w_kc, meta.positions, inv_freq_, rope_factor_);
    // q_abs: [T, H, lora + rope]
    o = ops_.mla_attention_absorbed_v_q(q_abs, cache.latent[cache_layer], lora, meta, softmax_scale_, topk_ptr,
                                        a.w_vc, a.o_proj, &oq);  // [T, H, v]
  } else {  // the W8A8 absorbed products (prepare_absorbed_fp8 set w_kc8 and w_vc8 together)
    Tensor q_abs = ops_.mla_absorb_q_fp8(q3, a.w_kc8, meta.positions, inv_freq_, rope_factor_);  // [T, H, lora + rope]
    ops_.side_join();
    Tensor o_lat = ops_.mla_attention_absorbed(q_abs, cache.latent[cache_layer], lora, meta, softmax_scale_,
                                               topk_ptr);  // [T, H, lora]
    o = ops_.bmm_heads_fp8(o_lat, a.w_vc8);                // [T, H, v]
  }
  Tensor out = ops_.linear_q(o.reshape({T, H * v}), oq, a.o_proj);  // [T, d]; over this rank's heads with TP
  if (!dp_attention_) ops_.all_reduce_(out);  // (data-parallel attention: whole heads, this rank's tokens)
  return out;
}

int64_t DeepseekModel::mha_row_bytes(const ModelConfig& cfg, DType dtype) {
  return cfg.num_attention_heads * (cfg.qk_nope_head_dim + cfg.v_head_dim) * static_cast<int64_t>(dtype_size(dtype));
}

void DeepseekModel::plan_mha_chunks_for(const AttnMetadata& meta, AttnMode mode) {
  // Decode steps and the absorbed form leave the last plan alone (attention() reads it only in the MHA form, which plans
  // afresh every step): a CUDA graph captures those steps, and dropping the plan's device tensors there would free
  // memory inside the capture. Nor V3.2 (top-k masks are by absolute position: its long contexts take the absorbed
  // form).
  if (mode == AttnMode::kAbsorbed || (mode == AttnMode::kAuto && meta.max_q_len <= 1) || cfg_.has_indexer()) return;
  mha_chunks_.clear();
  const int64_t max_rows = std::max<int64_t>(mha_chunk_bytes_ / mha_row_bytes(cfg_, ops_.activation_dtype()), 1);
  if (meta.total_context >= 0 && meta.total_context <= max_rows) return;  // one pass (the common case: no reads)
  // Host copies of the metadata (the runner's builders keep them; otherwise read back: a sync, prefill only).
  const auto host = [&](const Tensor& h, const Tensor& dev) { return h.defined() ? h : ops_.to_host(dev); };
  const Tensor lens = host(meta.host_seq_lens, meta.seq_lens), starts = host(meta.host_q_starts, meta.q_starts),
               pos = host(meta.host_positions, meta.positions);
  const std::vector<MhaChunk> plan = plan_mha_chunks(
      {lens.data_as<int32_t>(), static_cast<size_t>(meta.num_seqs)},
      {starts.data_as<int32_t>(), static_cast<size_t>(meta.num_seqs) + 1},
      {pos.data_as<int32_t>(), static_cast<size_t>(meta.num_tokens)}, max_rows);
  if (plan.empty()) return;
  // Every chunk's shifted positions, lengths and rows in one host buffer, one upload, then views.
  const int64_t T = meta.num_tokens, n = meta.num_seqs;
  int64_t total = 0;
  for (const MhaChunk& c : plan) total += T + n + c.num_rows();
  Tensor buf = Tensor::empty({total}, DType::kI32);
  int32_t* w = buf.data_as<int32_t>();
  for (const MhaChunk& c : plan) {
    for (int64_t s = 0; s < n; ++s)
      for (int32_t t = starts.data_as<int32_t>()[s]; t < starts.data_as<int32_t>()[s + 1]; ++t)
        w[t] = pos.data_as<int32_t>()[t] - c.shift[s];
    std::copy(c.seq_lens.begin(), c.seq_lens.end(), w + T);
    std::copy(c.rows.begin(), c.rows.end(), w + T + n);
    w += T + n + c.num_rows();
  }
  const Tensor dev = ops_.upload(buf);
  int64_t at = 0;
  for (const MhaChunk& c : plan) {
    MhaChunkRun r;
    r.meta = meta;
    r.meta.positions = dev.rows(at, at + T);
    r.meta.seq_lens = dev.rows(at + T, at + T + n);
    r.rows = dev.rows(at + T + n, at + T + n + c.num_rows());
    r.meta.max_seq_len = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
    r.meta.total_context = c.num_rows();
    r.meta.host_positions = r.meta.host_seq_lens = Tensor();  // (not the chunk's: nothing reads them further)
    r.meta.slot_mapping = Tensor();
    at += T + n + c.num_rows();
    mha_chunks_.push_back(std::move(r));
  }
}

Tensor DeepseekModel::mha_chunked(const Attention& a, const Tensor& q3, const Tensor& ctx) {
  const int64_t H = cfg_.num_attention_heads, nope = cfg_.qk_nope_head_dim, v = cfg_.v_head_dim;
  const int64_t lora = cfg_.kv_lora_rank;
  Tensor o, lse;  // [T, H, v], [T, H]: the chunks so far
  for (const MhaChunkRun& c : mha_chunks_) {
    const int64_t rows = c.rows.numel();
    Tensor part_ctx = ops_.embedding(ctx, c.rows);  // [rows, lora + rope]
    Tensor kv = ops_.linear(ops_.slice_cols(part_ctx, 0, lora), a.kv_b_proj).reshape({rows, H, nope + v});
    Tensor part_lse;                                                                                    // [T, H]
    Tensor part = ops_.mla_attention_mha(q3, kv, part_ctx, lora, c.meta, softmax_scale_, nullptr, &part_lse);  // [T, H, v]
    if (!o.defined()) {
      o = part;
      lse = part_lse;
    } else {
      ops_.merge_attention_parts_(o, lse, part, part_lse);
    }
  }
  return o;
}

Tensor DeepseekModel::indexer(const Attention& a, int cache_layer, const Tensor& x, const Tensor& q_resid,
                              const AttnMetadata& meta, KvCache& cache) {
  const int64_t T = x.dim(0), Hi = cfg_.index_n_heads, D = cfg_.index_head_dim, rope = cfg_.qk_rope_head_dim;
  DS_CHECK(q_resid.defined(), "the V3.2 indexer needs q_lora_rank > 0");
  // Query and key split [rope | nope] (rope first, unlike MLA), rotated with NeoX halves.
  Tensor q = ops_.linear(q_resid, a.idx_wq_b).reshape({T, Hi, D});                          // [T, Hi, D]
  ops_.rope_(q, 0, rope, meta.positions, inv_freq_, rope_factor_, RopeStyle::kNeox);
  Tensor k = ops_.layer_norm(ops_.linear(x, a.idx_wk), a.idx_k_norm_w, a.idx_k_norm_b, 1e-6f).reshape({T, 1, D});
  ops_.rope_(k, 0, rope, meta.positions, inv_freq_, rope_factor_, RopeStyle::kNeox);
  ops_.store_rows(cache.index_k[cache_layer], k.reshape({T, D}), meta.slot_mapping);
  Tensor w = ops_.linear(x, a.idx_weights_proj);                                           // [T, Hi]
  return ops_.indexer_topk(q, w, cache.index_k[cache_layer], meta, cfg_.index_topk,
                           static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))),
                           static_cast<float>(1.0 / std::sqrt(static_cast<double>(Hi))));  // [T, index_topk]
}

MlpOut DeepseekModel::mlp(const Layer& layer, const Tensor& x, const Fp8Act& xq) {
  // A gated MLP whose down reads the SiLU's FP8 quantization where the backend makes it.
  const auto gated = [&](const PreparedMlp& m, bool partial) {
    Fp8Act hq;
    const Tensor h = ops_.linear_silu_q_for(x, xq, m.gate_up, m.down, &hq);                   // [T, inter]
    return partial ? ops_.linear_partial_q(h, hq, m.down) : ops_.linear_q(h, hq, m.down);  // [T, d]
  };
  if (!layer.is_moe) return {gated(layer.dense, false), nullptr};  // [T, d]
  // Fused (routing_.shared_experts), the shared MLP's parts are experts that every token routes to. Apart, the
  // shared expert does not depend on the routing: it runs on the side chain beside the routed experts (and the
  // router and routing too when it forks before them: ModelOptions::SharedFork) and is added at the join.
  Tensor shared;  // [T, d] (fp32 where the backend keeps the partial sum unrounded)
  const auto shared_mlp = [&] {
    if (!layer.has_shared) return;
    ops_.side_begin();
    shared = gated(layer.shared, true);
    ops_.side_end();
  };
  using Fork = ModelOptions::SharedFork;
  const bool after = shared_fork_ == Fork::kAfterRoute || (shared_fork_ == Fork::kAuto && xq.defined());
  if (!after) shared_mlp();
  Tensor ids, weights;  // [T, top_k + shared_experts]
  ops_.moe_gate_route(x, layer.router, layer.correction_bias, routing_, &ids, &weights);  // logits [T, E] unused
  if (expert_counts_.defined() && layer.counted >= 0) {
    Tensor counts = expert_counts_.row(layer.counted);  // [E]
    ops_.moe_count_experts(ids, routing_.num_experts, count_real_rows_, counts);
  }
  if (routed_out_.defined() && layer.counted >= 0) {  // (DP attention: ids are every rank's rows; this rank's only)
    const int64_t row0 = dp_attention_ ? dp_offset_ : 0;
    ops_.moe_record_ids(ids.rows(row0, row0 + routed_out_.dim(0)), cfg_.num_experts_per_tok,
                        int64_t{layer.counted} * cfg_.num_experts_per_tok, routed_out_);
  }
  if (after) shared_mlp();
  // [T, d], maybe left for the next norm to sum; joins the side chain
  return ops_.moe_experts_open(x, xq, ids, weights, layer.experts, shared);
}

}  // namespace ds
