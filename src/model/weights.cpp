// Fills ModelWeights from a safetensors checkpoint (validating every tensor against the config) or from a
// seeded PRNG (`--load-format dummy`). Both walk the same layer structure, so they cannot disagree.
#include "model/weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "model/safetensors.h"

namespace ds {
namespace {

// What a tensor is, which decides accepted dtypes (loader) and initial values (dummy).
enum class Kind {
  kNorm,       // RMSNorm / LayerNorm weight: ~1
  kNormBias,   // LayerNorm bias: ~0
  kEmbed,      // embedding table
  kRouter,     // mlp.gate.weight
  kScoreBias,  // e_score_correction_bias (F32 on disk; any float dtype accepted)
};

// Where tensors come from. The first error sticks in `status`; later calls return undefined tensors.
class Source {
 public:
  virtual ~Source() = default;
  virtual bool has(const std::string& name) const = 0;
  virtual Tensor tensor(const std::string& name, const Shape& shape, Kind kind) = 0;
  // `quantizable`: the official FP8 checkpoints quantize this linear (dummy weights follow that).
  virtual LinearWeight linear(const std::string& prefix, int64_t out, int64_t in, bool quantizable) = 0;
  bool ok() const { return status.is_ok(); }
  Status status;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_float(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }
bool is_fp8(DType t) { return t == DType::kF8E4M3 || t == DType::kF8E5M2; }

// ---- checkpoint source ------------------------------------------------------------------------------

class CheckpointSource : public Source {
 public:
  CheckpointSource(const Checkpoint& ck, const ModelConfig& cfg) : ck_(ck), cfg_(cfg) {}

  bool has(const std::string& name) const override { return ck_.has(name); }

  Tensor tensor(const std::string& name, const Shape& shape, Kind kind) override {
    const TensorInfo* info = find(name);
    if (!info || !check_shape(*info, shape) || !check_float(*info)) return {};
    return fetch(name);
  }

  LinearWeight linear(const std::string& prefix, int64_t out, int64_t in, bool) override {
    LinearWeight lw;
    lw.block_n = cfg_.fp8.block_n;
    lw.block_k = cfg_.fp8.block_k;
    const std::string wname = prefix + ".weight";
    const std::string sname = wname + "_scale_inv";
    const TensorInfo* w = find(wname);
    if (!w || !check_shape(*w, {out, in})) return lw;
    const TensorInfo* s = ck_.has(sname) ? ck_.info(sname) : nullptr;
    if (s) {
      // A 2-D weight is block-FP8 iff its weight_scale_inv sibling exists.
      if (!w->supported || !is_fp8(w->dtype))
        return fail(file(wname), ": tensor '", wname, "' has dtype ", w->dtype_str, " but '", sname,
                    "' exists beside it (block-FP8 weights must be F8_E4M3 or F8_E5M2)"),
               lw;
      Shape grid = {ceil_div(out, lw.block_n), ceil_div(in, lw.block_k)};
      if (s->dtype_str != "F32")
        return fail(file(sname), ": tensor '", sname, "' has dtype ", s->dtype_str, ", expected F32"), lw;
      if (s->shape != grid)
        return fail(file(sname), ": tensor '", sname, "' has shape ", shape_str(s->shape), ", expected ",
                    shape_str(grid), " (weight [", out, ", ", in, "] in ", lw.block_n, "x", lw.block_k, " blocks)"),
               lw;
      lw.weight = fetch(wname);
      lw.scale_inv = fetch(sname);
      return lw;
    }
    if (w->supported && is_fp8(w->dtype))
      return fail(file(wname), ": tensor '", wname, "' is ", w->dtype_str, " but '", sname,
                  "' is missing (an FP8 weight needs its block scales)"),
             lw;
    if (!check_float(*w)) return lw;
    lw.weight = fetch(wname);
    return lw;
  }

  const std::set<std::string>& used() const { return used_; }

 private:
  template <class... Args>
  void fail(const Args&... args) {
    if (status.is_ok()) status = error(args...);
  }
  std::string file(const std::string& name) const { return ck_.file_of(name); }

  const TensorInfo* find(const std::string& name) {
    if (!ok()) return nullptr;
    const TensorInfo* info = ck_.info(name);
    if (!info) fail("tensor '", name, "' not found in ", ck_.dir());
    return info;
  }
  bool check_shape(const TensorInfo& info, const Shape& shape) {
    if (info.shape == shape) return true;
    fail(file(info.name), ": tensor '", info.name, "' has shape ", shape_str(info.shape), ", expected ",
         shape_str(shape));
    return false;
  }
  bool check_float(const TensorInfo& info) {
    if (info.supported && is_float(info.dtype)) return true;
    fail(file(info.name), ": tensor '", info.name, "' has dtype ", info.dtype_str, ", expected BF16, F16 or F32");
    return false;
  }
  Tensor fetch(const std::string& name) {
    Result<Tensor> r = ck_.get(name);
    if (!r.is_ok()) {
      fail(r.status().message());
      return {};
    }
    used_.insert(name);
    return std::move(r).value();
  }

  const Checkpoint& ck_;
  const ModelConfig& cfg_;
  std::set<std::string> used_;
};

// ---- dummy source -----------------------------------------------------------------------------------

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// xorshift64* stream, seeded per tensor chunk from (seed, name, chunk) so values depend neither on creation
// order nor on how many threads generate them.
class Rng {
 public:
  Rng(uint64_t seed, const std::string& name, uint64_t chunk = 0) {
    uint64_t s = seed ^ fnv1a(name);
    uint64_t c = chunk;
    s ^= splitmix64(c);
    state_ = splitmix64(s) | 1;
  }
  uint64_t next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545f4914f6cdd1dull;
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }  // [-1, 1)

 private:
  uint64_t state_;
};

constexpr float kSqrt3 = 1.7320508f;

// Dummy values are made in chunks of kFillChunk elements, each chunk from its own stream Rng(seed, name, chunk),
// so they depend neither on creation order nor on how many threads generate them.
constexpr int64_t kFillChunk = int64_t{1} << 20;

// `--load-format dummy`: tensors are allocated as the builder asks for them and filled afterwards, all chunks of
// all tensors on one pool of hardware_concurrency threads (fill_pending). Filled one tensor at a time, a V2-Lite
// expert matrix (2.9M values = 3 chunks) kept 3 threads busy: ~16 s of the device benchmarks' set-up.
class DummySource : public Source {
 public:
  DummySource(const ModelConfig& cfg, uint64_t seed) : cfg_(cfg), seed_(seed) {}

  bool has(const std::string&) const override { return false; }  // optional tensors are aliased

  Tensor tensor(const std::string& name, const Shape& shape, Kind kind) override {
    if (kind == Kind::kScoreBias) {
      Tensor t = Tensor::empty(shape, DType::kF32);
      defer(t, name, Fill::kScoreBias, 0.0f, 0.0f);
      return t;
    }
    float center = kind == Kind::kNorm ? 1.0f : 0.0f;
    float amp = kind == Kind::kNorm || kind == Kind::kNormBias ? 0.01f : 0.02f * kSqrt3;  // std 0.02
    return bf16_tensor(shape, name, center, amp);
  }

  LinearWeight linear(const std::string& prefix, int64_t out, int64_t in, bool quantizable) override {
    LinearWeight lw;
    lw.block_n = cfg_.fp8.block_n;
    lw.block_k = cfg_.fp8.block_k;
    const std::string name = prefix + ".weight";
    if (!(quantizable && cfg_.fp8.enabled)) {
      lw.weight = bf16_tensor({out, in}, name, 0.0f, 0.02f * kSqrt3);
      return lw;
    }
    // W = q * s with q uniform over [-448, 448] and per-block s around 0.02 * sqrt(3) / 448: std ~0.02.
    lw.weight = Tensor::empty({out, in}, DType::kF8E4M3);
    defer(lw.weight, name, Fill::kE4m3, 0.0f, 0.0f);
    lw.scale_inv = Tensor::empty({ceil_div(out, lw.block_n), ceil_div(in, lw.block_k)}, DType::kF32);
    defer(lw.scale_inv, name + "_scale_inv", Fill::kScale, 0.0f, 0.0f);
    return lw;
  }

  // Generates every value asked for so far.
  void fill_pending() {
    std::vector<std::pair<size_t, int64_t>> work;  // (pending tensor, chunk)
    for (size_t i = 0; i < pending_.size(); ++i)
      for (int64_t c = 0; c * kFillChunk < pending_[i].t.numel(); ++c) work.emplace_back(i, c);
    std::atomic<size_t> next{0};
    auto run = [&] {
      for (size_t w = next++; w < work.size(); w = next++) fill_chunk(pending_[work[w].first], work[w].second);
    };
    const size_t threads = std::min<size_t>(work.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(run);
    run();
    for (std::thread& th : pool) th.join();
    pending_.clear();
  }

 private:
  enum class Fill { kBf16, kScoreBias, kE4m3, kScale };
  struct Pending {
    Tensor t;  // shares the storage the weights hold
    std::string name;
    Fill fill;
    float center, amp;
  };

  void defer(const Tensor& t, const std::string& name, Fill fill, float center, float amp) {
    pending_.push_back({t, name, fill, center, amp});
  }

  void fill_chunk(Pending& p, int64_t chunk) const {
    Rng rng(seed_, p.name, static_cast<uint64_t>(chunk));
    const int64_t b = chunk * kFillChunk, e = std::min(p.t.numel(), b + kFillChunk);
    switch (p.fill) {
      case Fill::kBf16: {
        uint16_t* v = p.t.data_as<uint16_t>();
        for (int64_t i = b; i < e; ++i) v[i] = f32_to_bf16(p.center + p.amp * rng.uniform());
        break;
      }
      case Fill::kScoreBias: {
        float* v = p.t.f32();
        for (int64_t i = b; i < e; ++i) v[i] = 0.01f * rng.uniform();
        break;
      }
      case Fill::kE4m3: {
        uint8_t* v = p.t.data_as<uint8_t>();
        for (int64_t i = b; i < e; ++i) v[i] = f32_to_fp8e4m3(kFp8E4M3Max * rng.uniform());
        break;
      }
      case Fill::kScale: {
        float* v = p.t.f32();
        for (int64_t i = b; i < e; ++i) v[i] = 0.02f * kSqrt3 / kFp8E4M3Max * (1.0f + 0.25f * rng.uniform());
        break;
      }
    }
  }

  Tensor bf16_tensor(const Shape& shape, const std::string& name, float center, float amp) {
    Tensor t = Tensor::empty(shape, DType::kBF16);
    defer(t, name, Fill::kBf16, center, amp);
    return t;
  }

  const ModelConfig& cfg_;
  uint64_t seed_;
  std::vector<Pending> pending_;
};

// ---- the layer structure (spec section 2) -----------------------------------------------------------

MlpWeights build_mlp(Source& src, const std::string& p, int64_t inter, int64_t d) {
  MlpWeights m;
  m.gate = src.linear(p + "gate_proj", inter, d, true);
  m.up = src.linear(p + "up_proj", inter, d, true);
  m.down = src.linear(p + "down_proj", d, inter, true);
  return m;
}

// `p` is the layer prefix "model.layers.N.".
LayerWeights build_layer(Source& src, const ModelConfig& cfg, const std::string& p, bool is_moe, bool indexer) {
  const int64_t d = cfg.hidden_size;
  const int64_t H = cfg.num_attention_heads;
  LayerWeights l;
  l.input_norm = src.tensor(p + "input_layernorm.weight", {d}, Kind::kNorm);
  l.post_attn_norm = src.tensor(p + "post_attention_layernorm.weight", {d}, Kind::kNorm);

  AttentionWeights& a = l.attn;
  const std::string ap = p + "self_attn.";
  if (cfg.q_lora_rank > 0) {
    a.q_a_proj = src.linear(ap + "q_a_proj", cfg.q_lora_rank, d, true);
    a.q_a_norm = src.tensor(ap + "q_a_layernorm.weight", {cfg.q_lora_rank}, Kind::kNorm);
    a.q_b_proj = src.linear(ap + "q_b_proj", H * cfg.qk_head_dim(), cfg.q_lora_rank, true);
  } else {
    a.q_proj = src.linear(ap + "q_proj", H * cfg.qk_head_dim(), d, true);
  }
  a.kv_a_proj = src.linear(ap + "kv_a_proj_with_mqa", cfg.kv_lora_rank + cfg.qk_rope_head_dim, d, true);
  a.kv_a_norm = src.tensor(ap + "kv_a_layernorm.weight", {cfg.kv_lora_rank}, Kind::kNorm);
  a.kv_b_proj = src.linear(ap + "kv_b_proj", H * (cfg.qk_nope_head_dim + cfg.v_head_dim), cfg.kv_lora_rank, true);
  a.o_proj = src.linear(ap + "o_proj", d, H * cfg.v_head_dim, true);

  if (indexer) {
    IndexerWeights& ix = l.indexer;
    const std::string ip = ap + "indexer.";
    ix.wq_b = src.linear(ip + "wq_b", cfg.index_n_heads * cfg.index_head_dim, cfg.q_lora_rank, true);
    ix.wk = src.linear(ip + "wk", cfg.index_head_dim, d, true);
    ix.k_norm_weight = src.tensor(ip + "k_norm.weight", {cfg.index_head_dim}, Kind::kNorm);
    ix.k_norm_bias = src.tensor(ip + "k_norm.bias", {cfg.index_head_dim}, Kind::kNormBias);
    ix.weights_proj = src.linear(ip + "weights_proj", cfg.index_n_heads, d, false);
  }

  l.is_moe = is_moe;
  const std::string mp = p + "mlp.";
  if (!is_moe) {
    l.dense = build_mlp(src, mp, cfg.intermediate_size, d);
    return l;
  }
  const int64_t E = cfg.n_routed_experts;
  MoeWeights& m = l.moe;
  m.router = src.tensor(mp + "gate.weight", {E, d}, Kind::kRouter);
  if (cfg.topk_method == TopkMethod::kNoauxTc)
    m.correction_bias = src.tensor(mp + "gate.e_score_correction_bias", {E}, Kind::kScoreBias);
  m.experts.reserve(E);
  for (int64_t e = 0; e < E && src.ok(); ++e)
    m.experts.push_back(build_mlp(src, mp + "experts." + std::to_string(e) + ".", cfg.moe_intermediate_size, d));
  if (cfg.n_shared_experts > 0)
    m.shared = build_mlp(src, mp + "shared_experts.", cfg.n_shared_experts * cfg.moe_intermediate_size, d);
  return l;
}

void build_main(Source& src, const ModelConfig& cfg, ModelWeights& w) {
  const int64_t d = cfg.hidden_size;
  w.embed = src.tensor("model.embed_tokens.weight", {cfg.vocab_size, d}, Kind::kEmbed);
  w.final_norm = src.tensor("model.norm.weight", {d}, Kind::kNorm);
  if (cfg.tie_word_embeddings && !src.has("lm_head.weight")) {
    w.lm_head.weight = w.embed;
  } else {
    w.lm_head = src.linear("lm_head", cfg.vocab_size, d, false);
  }
  w.layers.reserve(cfg.num_hidden_layers);
  for (int i = 0; i < cfg.num_hidden_layers && src.ok(); ++i)
    w.layers.push_back(build_layer(src, cfg, "model.layers." + std::to_string(i) + ".", cfg.is_moe_layer(i),
                                   cfg.has_indexer()));
}

// One MTP module at model.layers.{num_hidden_layers + i}; stored copies of the embedding and head are
// used when present, else the main ones are shared (they are identical in released checkpoints).
MtpWeights build_mtp(Source& src, const ModelConfig& cfg, const ModelWeights& w, int i, bool is_moe, bool indexer) {
  const int64_t d = cfg.hidden_size;
  const std::string p = "model.layers." + std::to_string(cfg.num_hidden_layers + i) + ".";
  MtpWeights m;
  m.enorm = src.tensor(p + "enorm.weight", {d}, Kind::kNorm);
  m.hnorm = src.tensor(p + "hnorm.weight", {d}, Kind::kNorm);
  m.eh_proj = src.linear(p + "eh_proj", d, 2 * d, false);
  m.layer = build_layer(src, cfg, p, is_moe, indexer);
  m.shared_head_norm = src.tensor(p + "shared_head.norm.weight", {d}, Kind::kNorm);
  if (src.has(p + "shared_head.head.weight"))
    m.shared_head = src.linear(p + "shared_head.head", cfg.vocab_size, d, false);
  else
    m.shared_head = w.lm_head;
  if (src.has(p + "embed_tokens.weight"))
    m.embed = src.tensor(p + "embed_tokens.weight", {cfg.vocab_size, d}, Kind::kEmbed);
  else
    m.embed = w.embed;
  return m;
}

}  // namespace

Result<ModelWeights> load_weights(const std::string& model_dir, const ModelConfig& cfg, const LoadOptions& opts) {
  DS_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(model_dir));
  CheckpointSource src(ck, cfg);
  ModelWeights w;
  build_main(src, cfg, w);
  DS_RETURN_IF_ERROR(src.status);

  std::set<std::string> skipped_prefixes;
  for (int i = 0; i < cfg.num_nextn_predict_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(cfg.num_hidden_layers + i) + ".";
    if (!ck.has(p + "eh_proj.weight")) {
      DS_INFO("config has ", cfg.num_nextn_predict_layers, " MTP layer(s) but ", model_dir, " stores only ", i);
      break;
    }
    if (!opts.load_mtp) {
      skipped_prefixes.insert(p);
      continue;
    }
    bool is_moe = ck.has(p + "mlp.gate.weight");
    bool indexer = cfg.has_indexer() && ck.has(p + "self_attn.indexer.wq_b.weight");
    w.mtp.push_back(build_mtp(src, cfg, w, i, is_moe, indexer));
    DS_RETURN_IF_ERROR(src.status);
  }

  // Tensors nobody asked for usually mean a naming mismatch; say so, but do not fail (extra tensors such
  // as rotary inv_freq buffers are harmless).
  size_t unused = 0;
  std::string example;
  for (const std::string& n : ck.names()) {
    if (src.used().count(n) || n.find("rotary_emb.inv_freq") != std::string::npos) continue;
    bool skipped = false;
    for (const std::string& p : skipped_prefixes) skipped = skipped || n.rfind(p, 0) == 0;
    if (skipped) continue;
    if (unused++ == 0) example = n;
  }
  if (unused) DS_WARN(model_dir, ": ", unused, " checkpoint tensor(s) not used by the model, e.g. '", example, "'");
  return w;
}

ModelWeights make_dummy_weights(const ModelConfig& cfg, uint64_t seed, bool with_mtp) {
  DummySource src(cfg, seed);
  ModelWeights w;
  build_main(src, cfg, w);
  if (with_mtp)
    for (int i = 0; i < cfg.num_nextn_predict_layers; ++i)
      w.mtp.push_back(build_mtp(src, cfg, w, i, cfg.is_moe_layer(cfg.num_hidden_layers + i), cfg.has_indexer()));
  DS_CHECK(src.ok(), src.status.message());
  src.fill_pending();
  return w;
}

}  // namespace ds
