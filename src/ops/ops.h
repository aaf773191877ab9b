// The backend-neutral op interface the model is written against. The CPU backend (ops/cpu) is the plain
// fp32 reference and the oracle for the CUDA backend (ops/cuda); both implement exactly these semantics.
// Ops allocate their outputs on the backend's device; shapes are checked at the boundary.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/collective.h"
#include "ops/fp8.h"
#include "ops/linear_weight.h"
#include "ops/sampling.h"

namespace ds {

// Storage format of the latent KV cache (--kv-cache-dtype).
enum class KvCacheDtype {
  kAuto,     // the activation dtype
  kBf16,
  kFp8E4M3,  // FlashMLA layout: e4m3 latent with one scale per 128 values, bf16 rope part
  kFp8E5M2,
};

enum class RopeStyle {
  kInterleaved,  // pairs (x[2i], x[2i+1]) rotated by angle i: MLA (DeepSeek reference layout)
  kNeox,         // pairs (x[i], x[i + d/2]): the V3.2 indexer
};

// Batch metadata for attention and cache writes, computed on the host before launch so decode steps are
// graph-capturable. All tensors are I32 on the backend's device. Sequence s owns new tokens
// [q_starts[s], q_starts[s+1]) whose positions are contiguous and end at seq_lens[s] - 1: its context after
// this step is positions [0, seq_lens[s]), stored in pages block_table[s][p / page_size].
struct AttnMetadata {
  int num_seqs = 0;
  int num_tokens = 0;
  int page_size = 0;
  int max_seq_len = 0;   // max over seq_lens
  int max_q_len = 0;     // max new tokens of one sequence
  int64_t total_context = -1;  // sum(seq_lens) when the builder knows it on the host (-1: backends read it)
  Tensor positions;      // [T]
  Tensor slot_mapping;   // [T]  cache slot (page * page_size + offset) written by each new token
  Tensor q_starts;       // [num_seqs + 1]
  Tensor seq_lens;       // [num_seqs]
  Tensor block_table;    // [num_seqs, max_pages]
  // Host copies where the builder has them (the runner's do; tests' may not), for host-side plans that need the
  // per-sequence numbers (DeepseekModel's MHA context chunks) without reading the device tensors back.
  Tensor host_positions, host_q_starts, host_seq_lens;
  // [1] I32 on the backend where rows past it are padding (a CUDA graph's batch padded to its captured size; read
  // by the expert counts, ops that must not count padding); undefined: every row is real.
  Tensor real_rows;
};

// MoE routing parameters (from the config).
struct MoeRouting {
  enum class Method { kGreedy, kGroupLimitedGreedy, kNoauxTc } method = Method::kGreedy;
  bool sigmoid = false;        // scoring: sigmoid (V3) or softmax (V2)
  int num_experts = 0;
  int top_k = 0;
  int n_group = 1;
  int topk_group = 1;
  bool norm_topk_prob = false;
  float routed_scaling_factor = 1.0f;
  // Shared experts run as routed ones (SGLang's shared-experts fusion; DeepseekModel cuts the shared MLP into
  // this many expert-sized parts, appended to the expert list): every token also gets the entries num_experts ..
  // num_experts + shared_experts - 1, after its picks, with weight 1.
  int shared_experts = 0;
  int width() const { return top_k + shared_experts; }                 // entries per token
  int grouped_experts() const { return num_experts + shared_experts; }  // experts the entries are grouped over
};

// An activation quantized for block-FP8 linears as ops/fp8.h quantize_activations_fp8 does (per token per 128
// channels, e4m3, one fp32 scale per group), made by the kernel that produced the activation where a backend
// fuses the two (rms_norm_q). Undefined when none was made.
struct Fp8Act {
  Tensor q;       // [T, K] F8_E4M3
  Tensor scales;  // [T, ceil(K / 128)] F32
  bool ue8m0 = false;  // power-of-two scales (for weights whose scales are)
  bool defined() const { return q.defined(); }
};

// A gated MLP as a backend prepares it: gate and up fused into one [2 * inter, d] linear.
struct PreparedMlp {
  LinearWeight gate_up;  // [2 * inter, d]: rows [0, inter) gate, [inter, 2 * inter) up
  LinearWeight down;     // [d, inter]
};

// A decoder layer's MLP output on its way to the next layer's input norm, which adds it to the residual stream. A
// backend may hand an MoE output over unreduced (`parts`: what its combine would sum, backend-owned) so that norm
// sums it in its own kernel (CUDA decode: one launch fewer per layer); Ops::reduce makes the tensor where
// something else reads it.
struct MlpOut {
  Tensor value;                       // [T, d] when reduced
  std::shared_ptr<const void> parts;  // when not
  bool defined() const { return value.defined() || parts != nullptr; }
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;
  virtual DType activation_dtype() const = 0;  // F32 on CPU

  // ---- tensor parallelism ----
  // The group this backend's model is one rank of (null: a single rank). The model sums its partial outputs
  // (o_proj, the MLP / MoE down projections over sharded heads and intermediate columns) with all_reduce_.
  void set_collective(std::shared_ptr<Collective> c) { collective_ = std::move(c); }
  int tp_size() const { return collective_ ? collective_->size() : 1; }
  int tp_rank() const { return collective_ ? collective_->rank() : 0; }
  void all_reduce_(Tensor& t) {
    if (collective_ && collective_->size() > 1) collective_->all_reduce_sum(t);
  }

  // ---- weights (host checkpoint tensors -> backend layout) ----
  // In-place weight updates (/update_weights_from_disk): `dst` (prepared earlier) takes the values of `src`, prepared
  // the same way from new host weights, keeping dst's memory (CUDA graphs, tensor maps and expert tables hold its
  // addresses); what the backend derived from src for its own kernels follows, and src's backend state is released.
  // Errors: the two were not prepared alike (shape, dtype, format).
  virtual Status update_prepared(LinearWeight& dst, const LinearWeight& src) {
    DS_RETURN_IF_ERROR(update_tensor(dst.weight, src.weight));
    return update_tensor(dst.scale_inv, src.scale_inv);
  }
  // The same for one tensor: same shape and dtype (or neither defined), copied with copy_.
  Status update_tensor(Tensor& dst, const Tensor& src) {
    if (dst.defined() != src.defined()) return error("present in one checkpoint only");
    if (!dst.defined()) return Status::ok();
    if (dst.shape() != src.shape() || dst.dtype() != src.dtype())
      return error(dst.describe(), " cannot take ", src.describe());
    copy_(dst, src);
    return Status::ok();
  }
  virtual Tensor prepare_param(const Tensor& host) = 0;           // norms, biases, embeddings
  virtual LinearWeight prepare_linear(const LinearWeight& host) = 0;
  // [gate; up] stacked into one linear (both [inter, d]).
  virtual PreparedMlp prepare_mlp(const LinearWeight& gate, const LinearWeight& up,
                                  const LinearWeight& down) = 0;
  // Per-head slices of kv_b_proj for absorbed attention: w_kc [H, nope, kv_lora] (q_nope -> latent) and
  // w_vc [H, kv_lora, v] (latent -> v), both from kv_b_proj [H * (nope + v), kv_lora].
  virtual void prepare_absorbed(const LinearWeight& kv_b_proj, int num_heads, int64_t nope_dim, int64_t v_dim,
                                Tensor* w_kc, Tensor* w_vc) = 0;
  // The same in block-FP8 for the W8A8 absorbed products (mla_absorb_q_fp8, bmm_heads_fp8): where the backend
  // runs FP8 natively and kv_b_proj is block-FP8 with nope, v and kv_lora multiples of 128 (split_absorbed_fp8),
  // sets w_kc [H, kv_lora, nope] and w_vc [H, v, kv_lora] and returns true (only with DSERVE_FP8_BMM=1); else false,
  // and prepare_absorbed is the way.
  virtual bool prepare_absorbed_fp8(const LinearWeight& kv_b_proj, int num_heads, int64_t nope_dim, int64_t v_dim,
                                    HeadsFp8* w_kc, HeadsFp8* w_vc) {
    (void)kv_b_proj, (void)num_heads, (void)nope_dim, (void)v_dim, (void)w_kc, (void)w_vc;
    return false;
  }

  // ---- memory ----
  virtual Tensor empty(Shape shape, DType dtype) = 0;
  virtual Tensor upload(const Tensor& host) = 0;   // host tensor -> device copy (same dtype)
  virtual Tensor to_host(const Tensor& t) = 0;     // device -> host copy (CPU: returns t)
  virtual void fill(Tensor& t, float value) = 0;   // float tensors; NaN poisoning in tests
  virtual void zero_(Tensor& t) = 0;              // every byte 0, any dtype (counters)
  // dst's bytes = src's (same shape and dtype, both on this backend), stream-ordered.
  virtual void copy_(Tensor& dst, const Tensor& src) = 0;

  // Forward passes over more tokens than this wait for the device inside (CUDA: prefill-sized MoE reads the
  // per-expert counts back); the engine then finishes the step before them first, or its tokens would wait for
  // the whole launch. Smaller ones only queue work.
  virtual int64_t max_async_tokens() const { return INT64_MAX; }

  // ---- devices ----
  // Makes the calling thread run on this backend's device (CUDA: its GPU's streams and allocations; a rank's thread
  // of a multi-GPU tensor-parallel engine calls it before it runs the rank's model). CPU: nothing.
  virtual void bind_thread() {}

  // ---- concurrency ----
  // Two independent chains of a step (the shared expert beside the routed ones; the latent-cache store beside
  // the query projection): ops issued between side_begin() and side_end() may run concurrently with those
  // issued after side_end(), and side_join() orders what follows behind both (CUDA: a second stream, so the
  // latency-bound kernels of one chain hide under the other's; inside a graph capture, a fork and a join).
  // Only tensors made inside the section may die inside it. Not nested. CPU: plain program order.
  virtual void side_begin() {}
  virtual void side_end() {}
  virtual void side_join() {}
  // A backend may join a side section into the op that consumes its result (CUDA: the shared expert's output into
  // the norm that sums the MoE output, by a flag the consumer waits for) instead of at side_join; side_flush orders
  // what follows behind every such section. Called at the end of a forward.
  virtual void side_flush() {}

  // ---- elementwise / norms ----
  virtual Tensor embedding(const Tensor& table /*[V, d]*/, const Tensor& ids /*[T] I32*/) = 0;
  virtual Tensor rms_norm(const Tensor& x /*[T, n]*/, const Tensor& w /*[n]*/, float eps) = 0;
  // residual += x; returns rms_norm(residual) (the pre-norm residual stream of every decoder layer).
  virtual Tensor add_rms_norm(Tensor& residual /*[T, n]*/, const Tensor& x /*[T, n]*/, const Tensor& w,
                              float eps) = 0;
  virtual Tensor layer_norm(const Tensor& x /*[T, n]*/, const Tensor& w, const Tensor& b, float eps) = 0;
  virtual void add_(Tensor& acc, const Tensor& x) = 0;  // acc += x (x may be fp32 where acc is bf16)
  virtual Tensor silu_mul(const Tensor& gate_up /*[T, 2I]*/) = 0;  // silu(gate) * up -> [T, I]
  virtual Tensor concat_cols(const Tensor& a /*[T, n]*/, const Tensor& b /*[T, m]*/) = 0;  // [T, n + m]
  virtual Tensor slice_cols(const Tensor& x /*[T, n]*/, int64_t begin, int64_t end) = 0;  // [T, end - begin]
  virtual Tensor select_rows(const Tensor& x /*[T, n]*/, const std::vector<int64_t>& rows) = 0;

  // ---- matmuls ----
  virtual Tensor linear(const Tensor& x /*[T, in]*/, const LinearWeight& w) = 0;  // [T, out]
  // Router and lm_head logits in fp32 regardless of activation dtype; w is F32 or a prepared weight's dtype.
  virtual Tensor linear_f32(const Tensor& x /*[T, in]*/, const Tensor& w /*[out, in]*/) = 0;
  // The same into caller-owned storage (out [T, out] F32, contiguous): a CUDA graph's fixed logits buffer.
  virtual void linear_f32_into(const Tensor& x /*[T, in]*/, const Tensor& w /*[out, in]*/, Tensor& out) = 0;
  // The MLP halves with their neighbours fused where a backend can (decode: one kernel each instead of two):
  // silu_mul(linear(x, gate_up)) -> [T, I] for gate_up [2I, in], and acc += linear(x, w).
  virtual Tensor linear_silu(const Tensor& x /*[T, in]*/, const LinearWeight& gate_up) {
    return silu_mul(linear(x, gate_up));
  }
  virtual void linear_add_(Tensor& acc /*[T, out]*/, const Tensor& x /*[T, in]*/, const LinearWeight& w) {
    add_(acc, linear(x, w));
  }
  // linear(x, w) whose result is only ever added to another tensor with add_ (a partial sum computed apart, e.g.
  // the shared expert beside the routed ones): a backend may return it in fp32 so the sum is rounded once.
  virtual Tensor linear_partial(const Tensor& x /*[T, in]*/, const LinearWeight& w) { return linear(x, w); }
  // Two projections of the same input (q and kv_a of a layer): *y1 = linear(x, w1), *y2 = linear(x, w2).
  virtual void linear_pair(const Tensor& x, const LinearWeight& w1, const LinearWeight& w2, Tensor* y1, Tensor* y2) {
    *y1 = linear(x, w1);
    *y2 = linear(x, w2);
  }
  // ---- FP8 activations (issue 7: the quantization fused into the producing kernel) ----
  // rms_norm(x, w) (with a residual: residual += x first, as add_rms_norm) whose output feeds block-FP8 weights
  // like `consumer`: where the backend fuses them, *xq = that output quantized for consumer's activation scales;
  // otherwise *xq is undefined. The _q ops below take it beside x and use it wherever their weights take the same
  // scales (it is x's quantization, so results are those of the plain ops); the defaults ignore it.
  virtual Tensor rms_norm_q(Tensor* residual, const Tensor& x, const Tensor& w, float eps, const LinearWeight& consumer,
                            Fp8Act* xq) {
    (void)consumer;
    *xq = Fp8Act{};
    return residual ? add_rms_norm(*residual, x, w, eps) : rms_norm(x, w, eps);
  }
  // rms_norm_q for an MLP output that may be unreduced (moe_experts_open): residual += x; returns the norm.
  virtual Tensor rms_norm_q_open(Tensor& residual, const MlpOut& x, const Tensor& w, float eps,
                                 const LinearWeight& consumer, Fp8Act* xq) {
    return rms_norm_q(&residual, reduce(x), w, eps, consumer, xq);
  }
  virtual Tensor reduce(const MlpOut& x) {  // [T, d]
    DS_CHECK(x.value.defined() && !x.parts, "reduce: an MlpOut this backend did not make");
    return x.value;
  }
  virtual void linear_pair_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& w1, const LinearWeight& w2,
                             Tensor* y1, Tensor* y2) {
    (void)xq;
    linear_pair(x, w1, w2, y1, y2);
  }
  virtual Tensor linear_silu_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& gate_up) {
    (void)xq;
    return linear_silu(x, gate_up);
  }
  virtual Tensor linear_q(const Tensor& x /*[T, in]*/, const Fp8Act& xq, const LinearWeight& w) {  // [T, out]
    (void)xq;
    return linear(x, w);
  }
  // linear_silu_q whose output feeds block-FP8 weights like `consumer` (the MLP's down): where the backend fuses
  // it, *hq = that output quantized for consumer's activation scales (as rms_norm_q's xq), else undefined.
  virtual Tensor linear_silu_q_for(const Tensor& x, const Fp8Act& xq, const LinearWeight& gate_up,
                                   const LinearWeight& consumer, Fp8Act* hq) {  // [T, inter]
    (void)consumer;
    *hq = Fp8Act{};
    return linear_silu_q(x, xq, gate_up);
  }
  virtual Tensor linear_partial_q(const Tensor& x /*[T, in]*/, const Fp8Act& xq, const LinearWeight& w) {
    (void)xq;
    return linear_partial(x, w);
  }

  // Per-head batched matmul: out[t, h, :] = x[t, h, :] @ w[h]  ([T, H, K] x [H, K, N] -> [T, H, N]).
  virtual Tensor bmm_heads(const Tensor& x, const Tensor& w) = 0;
  // Its W8A8 form on weights from prepare_absorbed_fp8: out[t, h, :] = x[t, h, :] W[h]^T with x quantized per
  // token per head per 128 ([T, H, K] x [H, N, K] -> [T, H, N]; bmm_heads_w8a8_reference's semantics).
  virtual Tensor bmm_heads_fp8(const Tensor& x, const HeadsFp8& w) {
    (void)x, (void)w;
    DS_CHECK(false, "this backend has no FP8 absorbed products");
    return {};
  }

  // ---- rotary ----
  // Rotates dims [rot_offset, rot_offset + rot_dim) of every head of x [T, H, head_dim] in place, by angle
  // positions[t] * inv_freq[i]; cos and sin are multiplied by attn_factor.
  virtual void rope_(Tensor& x, int64_t rot_offset, int64_t rot_dim, const Tensor& positions,
                     const Tensor& inv_freq /*[rot_dim / 2] F32*/, float attn_factor, RopeStyle style) = 0;

  // ---- KV cache ----
  // One layer's latent cache [c (nope) | k_pe (rope)] for `slots` tokens, NaN-poisoned. The default holds
  // [slots, nope + rope] in the activation dtype, the FP8 dtypes' values rounded as their packed format would
  // hold them (store_latent_rows); CUDA stores the packed rows themselves (kernels/kv_fp8.h).
  virtual Tensor empty_latent_cache(int64_t slots, int64_t nope, int64_t rope, KvCacheDtype dtype) {
    (void)dtype;
    Tensor t = empty({slots, nope + rope}, activation_dtype());
    fill(t, std::numeric_limits<float>::quiet_NaN());
    return t;
  }
  virtual void store_rows(Tensor& cache /*[slots, D]*/, const Tensor& rows /*[T, D]*/,
                          const Tensor& slot_mapping /*[T]*/) = 0;
  // Latent cache rows [T, D] whose first `nope` columns are the latent and the rest the rope key, stored in
  // `dtype`. Backends without a packed format override this; the default stores rows as they are.
  virtual void store_latent_rows(Tensor& cache, const Tensor& rows, const Tensor& slot_mapping, int64_t nope,
                                 KvCacheDtype dtype) {
    DS_CHECK(dtype == KvCacheDtype::kAuto, "this backend has no packed KV cache format");
    store_rows(cache, rows, slot_mapping);
  }
  // ---- absorbed-MLA helpers: each replaces a chain of slice / norm / rope / concat / store ops, and the
  // default is that chain, so every backend has them and the CPU stays the reference ----
  // Writes the latent cache rows of the new tokens: cache[slot_mapping[t]] = [rms_norm(kv_a[t, :lora], norm_w) |
  // rope(kv_a[t, lora:])] (interleaved pairs), stored in `dtype` as store_latent_rows does.
  virtual void mla_store_latent(const Tensor& kv_a /*[T, lora + rope]*/, const Tensor& norm_w /*[lora]*/, float eps,
                                const Tensor& positions, const Tensor& inv_freq, float attn_factor, Tensor& cache,
                                const Tensor& slot_mapping, KvCacheDtype dtype) {
    const int64_t T = kv_a.dim(0), lora = norm_w.dim(0), rope = kv_a.dim(1) - lora;
    Tensor latent = rms_norm(slice_cols(kv_a, 0, lora), norm_w, eps);              // [T, lora]
    Tensor k_pe = slice_cols(kv_a, lora, lora + rope).reshape({T, 1, rope});      // [T, 1, rope]
    rope_(k_pe, 0, rope, positions, inv_freq, attn_factor, RopeStyle::kInterleaved);
    store_latent_rows(cache, concat_cols(latent, k_pe.reshape({T, rope})), slot_mapping, lora, dtype);
  }
  // The absorbed query [T, H, lora + rope] = [q[:, h, :nope] @ w_kc[h] | rope(q[:, h, nope:])] from the
  // un-rotated q [T, H, nope + rope] and w_kc [H, nope, lora]; q is not modified.
  virtual Tensor mla_absorb_q(const Tensor& q, const Tensor& w_kc, const Tensor& positions, const Tensor& inv_freq,
                              float attn_factor) {
    return absorb_q_chain(q, w_kc.dim(1), positions, inv_freq, attn_factor,
                          [&](const Tensor& q_nope) { return bmm_heads(q_nope, w_kc); });
  }

  // mla_store_latent and mla_absorb_q of the same step (positions, inv_freq, attn_factor shared): stores the
  // latent rows and returns the absorbed query. The default runs the store beside the query's product (side
  // stream) and joins before returning; a backend may do both in one launch at decode sizes.
  virtual Tensor mla_store_absorb_q(const Tensor& kv_a, const Tensor& norm_w, float eps, Tensor& cache,
                                    const Tensor& slot_mapping, KvCacheDtype dtype, const Tensor& q, const Tensor& w_kc,
                                    const Tensor& positions, const Tensor& inv_freq, float attn_factor) {
    side_begin();
    mla_store_latent(kv_a, norm_w, eps, positions, inv_freq, attn_factor, cache, slot_mapping, dtype);
    side_end();
    Tensor q_abs = mla_absorb_q(q, w_kc, positions, inv_freq, attn_factor);  // [T, H, lora + rope]
    side_join();
    return q_abs;
  }

  // mla_absorb_q with w_kc from prepare_absorbed_fp8 ([H, lora, nope]): the q_nope product through bmm_heads_fp8.
  virtual Tensor mla_absorb_q_fp8(const Tensor& q, const HeadsFp8& w_kc, const Tensor& positions,
                                  const Tensor& inv_freq, float attn_factor) {
    return absorb_q_chain(q, w_kc.in_features(), positions, inv_freq, attn_factor,
                          [&](const Tensor& q_nope) { return bmm_heads_fp8(q_nope, w_kc); });
  }

  // The default absorbed-query chain: [product(q[:, :, :nope]) | rope(q[:, :, nope:])], product mapping
  // [T, H, nope] to [T, H, lora].
  template <typename Product>
  Tensor absorb_q_chain(const Tensor& q, int64_t nope, const Tensor& positions, const Tensor& inv_freq,
                        float attn_factor, Product product) {
    const int64_t T = q.dim(0), H = q.dim(1), rope = q.dim(2) - nope;
    Tensor qf = q.reshape({T * H, nope + rope});
    Tensor q_lat = product(slice_cols(qf, 0, nope).reshape({T, H, nope}));  // [T, H, lora]
    const int64_t lora = q_lat.dim(2);
    Tensor q_pe = slice_cols(qf, nope, nope + rope).reshape({T, H, rope});  // [T, H, rope]
    rope_(q_pe, 0, rope, positions, inv_freq, attn_factor, RopeStyle::kInterleaved);
    return concat_cols(q_lat.reshape({T * H, lora}), q_pe.reshape({T * H, rope})).reshape({T, H, lora + rope});
  }

  // Every sequence's whole context [0, seq_lens[s]) in order: [sum(seq_lens), D].
  virtual Tensor gather_context(const Tensor& cache /*[slots, D]*/, const AttnMetadata& m) = 0;
  // gather_context of a latent cache made by empty_latent_cache(.., nope, .., dtype): [sum(seq_lens), nope + rope]
  // in the activation dtype, packed rows dequantised.
  virtual Tensor gather_latent_context(const Tensor& cache, const AttnMetadata& m, int64_t nope, KvCacheDtype dtype) {
    (void)nope;
    (void)dtype;
    return gather_context(cache, m);
  }

  // ---- attention ----
  // MLA in MHA form (prefill): q [T, H, nope + rope]; kv [S, H, nope + v] (kv_b_proj of the gathered
  // context latents, S = sum(seq_lens)); ctx [S, D] gathered cache rows whose columns
  // [rope_offset, rope_offset + rope) hold the rotated shared key. Causal by position. topk (optional,
  // [T, K] I32, -1 padded): the only context positions a query may attend (V3.2 DSA). -> [T, H, v]
  // lse (optional): *lse = [T, H] F32, each row's ln sum_j exp(scale * score_j) over the positions it attended
  // (-inf where it attended none: its output row is then 0), for merge_attention_parts_.
  virtual Tensor mla_attention_mha(const Tensor& q, const Tensor& kv, const Tensor& ctx, int64_t rope_offset,
                                   const AttnMetadata& m, float scale, const Tensor* topk, Tensor* lse) = 0;
  // The attention over two disjoint sets of positions from each one's (out, lse) as mla_attention_mha gives them:
  // o [T, H, v] and lse [T, H] become the union's, in place (a -inf part adds nothing). The MHA prefill over a
  // long context runs one context chunk at a time with it (DeepseekModel: kv_b_proj's output for one chunk).
  virtual void merge_attention_parts_(Tensor& o, Tensor& lse, const Tensor& o_part, const Tensor& lse_part) = 0;
  // MLA in absorbed (MQA) form over the paged cache: q [T, H, D] (absorbed nope part | rope part),
  // cache [slots, D] (or empty_latent_cache's packed rows with nope = v_dim); value = first v_dim columns of
  // each cache row. -> [T, H, v_dim]
  virtual Tensor mla_attention_absorbed(const Tensor& q, const Tensor& cache, int64_t v_dim,
                                        const AttnMetadata& m, float scale, const Tensor* topk) = 0;
  // mla_attention_absorbed followed by the absorbed W_UV product: [T, H, v] = bmm_heads(attention, w_vc) with
  // w_vc [H, v_dim, v]. The default is those two ops; a backend may fuse the product into the attention's tail.
  virtual Tensor mla_attention_absorbed_v(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                          float scale, const Tensor* topk, const Tensor& w_vc) {
    return bmm_heads(mla_attention_absorbed(q, cache, v_dim, m, scale, topk), w_vc);  // [T, H, v]
  }
  // The same, its [T, H * v] output feeding block-FP8 weights like `consumer` (o_proj): *xq as rms_norm_q's (that
  // output's quantization where the backend makes it in the attention's tail, else undefined).
  virtual Tensor mla_attention_absorbed_v_q(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                            float scale, const Tensor* topk, const Tensor& w_vc,
                                            const LinearWeight& consumer, Fp8Act* xq) {
    (void)consumer;
    *xq = Fp8Act{};
    return mla_attention_absorbed_v(q, cache, v_dim, m, scale, topk, w_vc);
  }

  // ---- V3.2 lightning indexer ----
  // score[t, s] = sum_h (w[t, h] * w_scale) * relu(q_scale * q[t, h, :] . k_cache[slot(s), :]) over context
  // positions s <= positions[t]; returns the top min(topk, positions[t] + 1) positions per token (ties to the lower
  // position), in ascending position order, -1 padded.
  virtual Tensor indexer_topk(const Tensor& q /*[T, Hi, D]*/, const Tensor& w /*[T, Hi] F32*/,
                              const Tensor& k_cache /*[slots, D]*/, const AttnMetadata& m, int topk,
                              float q_scale, float w_scale) = 0;

  // ---- MoE ----
  // Router scores -> top-k expert ids [T, K] I32 and weights [T, K] F32 (bias: selection only, may be
  // undefined), ids in descending order of the selection score; ties go to the lower expert / group index. With
  // r.shared_experts, K = r.width(): the shared experts' entries follow the picks.
  virtual void moe_route(const Tensor& logits /*[T, E] F32*/, const Tensor& bias, const MoeRouting& r,
                         Tensor* topk_ids, Tensor* topk_weights) = 0;
  // The router and the routing together: logits = x . router^T in fp32 ([T, E], returned), then moe_route.
  // Backends may fuse the two at decode sizes (CUDA: one launch that also groups the entries by expert for the
  // moe_experts op that takes these topk_ids next).
  virtual Tensor moe_gate_route(const Tensor& x /*[T, d]*/, const Tensor& router /*[E, d]*/, const Tensor& bias,
                                const MoeRouting& r, Tensor* topk_ids, Tensor* topk_weights) {
    Tensor logits = linear_f32(x, router);  // [T, E]
    moe_route(logits, bias, r, topk_ids, topk_weights);
    return logits;
  }
  // SGLang's expert distribution recorder (stat mode): counts[e] += the entries of expert e in [0, num_experts)
  // among topk_ids' first rows: *real_rows of them ([1] I32 on the backend: a CUDA graph's padded batch), or all
  // where real_rows is undefined. Fused shared experts' entries (ids >= num_experts) are not counted.
  virtual void moe_count_experts(const Tensor& topk_ids /*[T, W] I32*/, int num_experts, const Tensor& real_rows,
                                 Tensor& counts /*[num_experts] I32*/) = 0;
  // SGLang's return_routed_experts: out[t, column + j] = topk_ids[t, j] for every row t of topk_ids and j < k (the
  // routed picks; fused shared experts' entries after them are left out).
  virtual void moe_record_ids(const Tensor& topk_ids /*[T, W] I32*/, int k, int64_t column,
                              Tensor& out /*[>= T, >= column + k] I32*/) = 0;
  // sum_k topk_weights[t, k] * expert[topk_ids[t, k]](x[t]) -> [T, d]. An undefined expert (expert parallelism:
  // another rank holds it) adds nothing (CPU backend; CUDA takes no such list yet).
  virtual Tensor moe_experts(const Tensor& x /*[T, d]*/, const Tensor& topk_ids, const Tensor& topk_weights,
                             const std::vector<PreparedMlp>& experts) = 0;
  // moe_experts given x's quantization too (see rms_norm_q).
  virtual Tensor moe_experts_q(const Tensor& x, const Fp8Act& xq, const Tensor& topk_ids, const Tensor& topk_weights,
                               const std::vector<PreparedMlp>& experts) {
    (void)xq;
    return moe_experts(x, topk_ids, topk_weights, experts);
  }
  // moe_experts_q(...) + shared ([T, d]: the shared expert's output, bf16 or linear_partial's fp32), where shared
  // was made between side_begin() and side_end(): this op does the side_join() before it reads shared, so the
  // routed experts still run beside that chain. Backends may add it inside the combine (one launch fewer).
  virtual Tensor moe_experts_shared_q(const Tensor& x, const Fp8Act& xq, const Tensor& topk_ids,
                                      const Tensor& topk_weights, const std::vector<PreparedMlp>& experts,
                                      const Tensor& shared) {
    Tensor y = moe_experts_q(x, xq, topk_ids, topk_weights, experts);
    side_join();
    add_(y, shared);
    return y;
  }

  // moe_experts_shared_q (or moe_experts_q where `shared` is undefined) for a result that only the next
  // rms_norm_q_open (or reduce) reads: a backend may leave it unreduced.
  virtual MlpOut moe_experts_open(const Tensor& x, const Fp8Act& xq, const Tensor& topk_ids,
                                  const Tensor& topk_weights, const std::vector<PreparedMlp>& experts,
                                  const Tensor& shared) {
    return {shared.defined() ? moe_experts_shared_q(x, xq, topk_ids, topk_weights, experts, shared)
                             : moe_experts_q(x, xq, topk_ids, topk_weights, experts),
            nullptr};
  }

  // ---- output ----
  virtual Tensor log_softmax(const Tensor& logits /*[T, V]*/) = 0;  // F32
  // ---- sampling ----
  // One token per batch row from logits [R, >= batch.vocab] (F32 or BF16) with penalties, temperature,
  // top-k/top-p/min-p and the host's uniform, plus requested logprobs; exact semantics in ops/sampling.h.
  // Only B ids (and the requested logprobs) come back to the host. Returns without waiting for the device;
  // rows with store_index >= 0 also write their token to token_store [rows] I32 on the backend, where the
  // next step's input ids can read it (resolve_tokens_) before the host has seen it (overlap scheduling).
  virtual std::unique_ptr<PendingSample> sample_async(const Tensor& logits, const SampleBatch& batch,
                                                      const Tensor& token_store) = 0;
  SampleResult sample(const Tensor& logits, const SampleBatch& batch) {
    return sample_async(logits, batch, Tensor())->wait();
  }
  // ids [T] I32 on the backend, in place: an id < 0 stands for the token last sampled into store row
  // -id - 1 (the step before this one may still be running), and becomes store[-id - 1].
  virtual void resolve_tokens_(Tensor& ids, const Tensor& store) = 0;
  // store [R] I32 on the backend: store[r] = the greedy token of logits row r ([R, >= vocab]; F32, CUDA also
  // BF16): the first maximum of columns [0, vocab), or 0 when the row holds a non-finite value there (no error path:
  // for callers that keep tokens on the device, e.g. bench-one-batch's decode graphs; Ops::sample reports such rows).
  // Nothing comes back to the host, so a CUDA graph may hold it. At most kGreedyToStoreMaxRows rows.
  virtual void greedy_to_store_(const Tensor& logits, int64_t vocab, Tensor& store) = 0;
  static constexpr int64_t kGreedyToStoreMaxRows = 8192;  // CUDA keeps a counter per row

 private:
  std::shared_ptr<Collective> collective_;
};

std::unique_ptr<Ops> make_cpu_ops();  // ops/cpu/cpu_ops.cpp
#ifdef DSERVE_WITH_CUDA
std::unique_ptr<Ops> make_cuda_ops(int device_index);  // ops/cuda
#endif

}  // namespace ds
