// config.json parsing for deepseek_v2 / deepseek_v3 / deepseek_v32 (defaults follow transformers 5.17),
// plus the derived YaRN frequencies, attention factor and softmax scale computed exactly as transformers does.
#include "model/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include "model/json_util.h"

namespace ds {
namespace {

using json = nlohmann::json;

const char* json_type(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// Reads typed fields of one JSON object; `prefix` is the dotted path used in messages ("rope_scaling.").
// The first failure is kept in `err` and later reads become no-ops, so parsing code stays linear.
class Fields {
 public:
  Fields(const json& obj, std::string prefix, std::string* err) : obj_(obj), prefix_(std::move(prefix)), err_(err) {}

  // Present and not null.
  bool has(const char* key) const {
    auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }
  bool present(const char* key) const { return obj_.find(key) != obj_.end(); }
  const json* raw(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }

  std::string name(const char* key) const { return prefix_ + key; }

  void fail(const std::string& msg) {
    if (err_->empty()) *err_ = "config.json: " + msg;
  }
  void fail_field(const char* key, const std::string& what) { fail("field '" + name(key) + "' " + what); }

  // Integer field (integral JSON numbers only; 512.0 is accepted, 512.5 and "512" are not).
  // min_value: the smallest accepted value; the message says "positive" / "non-negative" accordingly.
  int64_t integer(const char* key, int64_t dflt, bool required, int64_t min_value) {
    if (!err_->empty()) return dflt;
    if (!has(key)) {
      if (required) fail("missing required field '" + name(key) + "'");
      return dflt;
    }
    const json& v = obj_.at(key);
    int64_t out = 0;
    bool ok = false;
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      ok = u <= static_cast<uint64_t>(INT64_MAX);
      out = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
      out = v.get<int64_t>();
      ok = true;
    } else if (v.is_number_float()) {
      double d = v.get<double>();
      ok = std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15;
      if (ok) out = static_cast<int64_t>(d);  // casting an out-of-range double is UB
    }
    if (!ok || out < min_value) {
      const char* kind = min_value == 1 ? "a positive integer" : min_value == 0 ? "a non-negative integer" : "an integer";
      std::string got = v.is_number() ? v.dump() : json_type(v);
      fail_field(key, std::string("must be ") + kind + " (got " + got + ")");
      return dflt;
    }
    return out;
  }
  int positive_int(const char* key, int64_t dflt, bool required) {
    return static_cast<int>(narrow(key, integer(key, dflt, required, 1)));
  }
  int nonneg_int(const char* key, int64_t dflt) { return static_cast<int>(narrow(key, integer(key, dflt, false, 0))); }

  double number(const char* key, double dflt, bool required, bool positive) {
    if (!err_->empty()) return dflt;
    if (!has(key)) {
      if (required) fail("missing required field '" + name(key) + "'");
      return dflt;
    }
    const json& v = obj_.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      fail_field(key, std::string("must be a number (got ") + json_type(v) + ")");
      return dflt;
    }
    double d = v.get<double>();
    if (positive && !(d > 0)) {
      fail_field(key, "must be a positive number (got " + v.dump() + ")");
      return dflt;
    }
    return d;
  }

  bool boolean(const char* key, bool dflt) {
    if (!err_->empty() || !has(key)) return dflt;
    const json& v = obj_.at(key);
    if (!v.is_boolean()) {
      fail_field(key, std::string("must be true or false (got ") + json_type(v) + ")");
      return dflt;
    }
    return v.get<bool>();
  }

  std::string string(const char* key, const std::string& dflt, bool required) {
    if (!err_->empty()) return dflt;
    if (!has(key)) {
      if (required) fail("missing required field '" + name(key) + "'");
      return dflt;
    }
    const json& v = obj_.at(key);
    if (!v.is_string()) {
      fail_field(key, std::string("must be a string (got ") + json_type(v) + ")");
      return dflt;
    }
    return v.get<std::string>();
  }

 private:
  int64_t narrow(const char* key, int64_t v) {
    if (v > INT32_MAX) {
      fail_field(key, "is too large (" + std::to_string(v) + ")");
      return 0;
    }
    return v;
  }

  const json& obj_;
  std::string prefix_;
  std::string* err_;
};

// Per-family defaults of the optional fields (transformers' configuration_deepseek_v{2,3,32}.py).
struct FamilyDefaults {
  int n_shared_experts;
  int n_group;
  int topk_group;
  int first_k_dense_replace;
  bool norm_topk_prob;
  double routed_scaling_factor;
  const char* topk_method;
  const char* scoring_func;
  int64_t max_position_embeddings;
  int64_t bos, eos;
};

FamilyDefaults defaults_for(ModelFamily f) {
  switch (f) {
    case ModelFamily::kDeepseekV2:
      return {2, 1, 1, 0, false, 1.0, "greedy", "softmax", 2048, 1, 2};
    case ModelFamily::kDeepseekV3:
      return {1, 8, 4, 3, true, 2.5, "noaux_tc", "sigmoid", 4096, 0, 1};
    case ModelFamily::kDeepseekV32:
      return {1, 8, 4, 3, true, 2.5, "noaux_tc", "sigmoid", 163840, 0, 1};
  }
  return {};
}

void parse_rope(const json& root, Fields& top, ModelConfig& c, std::string* err) {
  c.rope_theta = top.number("rope_theta", 10000.0, false, true);
  // transformers >= 5 writes rope_parameters (with rope_type, maybe rope_theta); official checkpoints
  // write rope_scaling (with type). rope_parameters wins when both are present, as in transformers.
  const char* key = nullptr;
  if (top.has("rope_parameters")) key = "rope_parameters";
  else if (top.has("rope_scaling")) key = "rope_scaling";
  if (!key || !err->empty()) return;
  const json& rp = root.at(key);
  if (!rp.is_object()) {
    top.fail_field(key, std::string("must be an object or null (got ") + json_type(rp) + ")");
    return;
  }
  Fields f(rp, std::string(key) + ".", err);
  // rope_theta inside rope_parameters takes precedence (standardize_rope_params uses setdefault).
  c.rope_theta = f.number("rope_theta", c.rope_theta, false, true);
  const char* type_key = f.has("rope_type") ? "rope_type" : "type";
  RopeScaling& r = c.rope_scaling;
  r.type = f.string(type_key, "default", false);
  if (!err->empty()) return;
  if (r.type != "default" && r.type != "yarn") {
    f.fail_field(type_key, "value '" + r.type + "' is not supported (expected \"default\" or \"yarn\")");
    return;
  }
  if (r.type == "default") return;
  // As in transformers: a top-level original_max_position_embeddings overrides the one inside, and
  // max_position_embeddings is the fallback when neither is given.
  if (top.has("original_max_position_embeddings"))
    r.original_max_position_embeddings = top.integer("original_max_position_embeddings", 0, false, 1);
  else
    r.original_max_position_embeddings =
        f.integer("original_max_position_embeddings", c.max_position_embeddings, false, 1);
  if (!err->empty()) return;
  r.factor = f.number("factor", 1.0, true, true);  // transformers 5.17 rejects yarn without a factor
  // transformers: `rope_parameters.get("beta_fast") or 32`, so 0 also means the default.
  r.beta_fast = f.number("beta_fast", 32.0, false, false);
  if (r.beta_fast == 0) r.beta_fast = 32.0;
  r.beta_slow = f.number("beta_slow", 1.0, false, false);
  if (r.beta_slow == 0) r.beta_slow = 1.0;
  r.mscale = f.number("mscale", 0.0, false, false);
  r.mscale_all_dim = f.number("mscale_all_dim", 0.0, false, false);
  r.attention_factor = f.number("attention_factor", 0.0, false, false);
  r.truncate = f.boolean("truncate", true);
  if (err->empty() && !(r.beta_fast > 0 && r.beta_slow > 0))
    f.fail_field("beta_fast", "and beta_slow must be positive");
}

void parse_quant(const json& root, Fields& top, ModelConfig& c, std::string* err) {
  if (!top.has("quantization_config") || !err->empty()) return;
  const json& q = root.at("quantization_config");
  if (!q.is_object()) {
    top.fail_field("quantization_config", std::string("must be an object (got ") + json_type(q) + ")");
    return;
  }
  Fields f(q, "quantization_config.", err);
  std::string method = f.string("quant_method", "", true);
  if (!err->empty()) return;
  if (method != "fp8") {
    f.fail_field("quant_method", "value '" + method + "' is not supported (only \"fp8\" block quantization)");
    return;
  }
  c.fp8.enabled = true;
  std::string fmt = f.string("fmt", "e4m3", false);
  if (err->empty() && fmt != "e4m3" && fmt != "e5m2") {
    f.fail_field("fmt", "value '" + fmt + "' is not supported (expected \"e4m3\")");
    return;
  }
  c.fp8.activation_scheme = f.string("activation_scheme", "dynamic", false);
  if (err->empty() && c.fp8.activation_scheme != "dynamic") {
    f.fail_field("activation_scheme", "value '" + c.fp8.activation_scheme + "' is not supported (expected \"dynamic\")");
    return;
  }
  if (f.has("weight_block_size")) {
    const json& b = q.at("weight_block_size");
    bool ok = b.is_array() && b.size() == 2;
    int64_t v[2] = {0, 0};
    for (int i = 0; ok && i < 2; ++i) {
      ok = b[i].is_number_integer() && b[i].get<int64_t>() > 0 && b[i].get<int64_t>() <= (1 << 20);
      if (ok) v[i] = b[i].get<int64_t>();
    }
    if (!ok) {
      f.fail_field("weight_block_size", "must be a list of 2 positive integers (got " + b.dump() + ")");
      return;
    }
    c.fp8.block_n = static_cast<int>(v[0]);
    c.fp8.block_k = static_cast<int>(v[1]);
  }
  std::string scale_fmt = f.string("scale_fmt", "", false);
  if (!err->empty()) return;
  if (scale_fmt == "ue8m0") {
    c.fp8.ue8m0 = true;
  } else if (!scale_fmt.empty()) {
    f.fail_field("scale_fmt", "value '" + scale_fmt + "' is not supported (expected \"ue8m0\" or absent)");
  }
}

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

Result<ModelConfig> parse_model_config(const std::string& json_text) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return error("config.json: invalid JSON: ", parse_error_text(e));
  }
  if (!root.is_object()) return error("config.json: top level must be a JSON object (got ", json_type(root), ")");

  std::string err;
  Fields f(root, "", &err);
  ModelConfig c;
  c.model_type = f.string("model_type", "", true);
  if (!err.empty()) return Status::error(err);
  if (c.model_type == "deepseek_v2") c.family = ModelFamily::kDeepseekV2;
  else if (c.model_type == "deepseek_v3") c.family = ModelFamily::kDeepseekV3;
  else if (c.model_type == "deepseek_v32") c.family = ModelFamily::kDeepseekV32;
  else
    return error("config.json: unsupported model_type '", c.model_type,
                 "' (expected deepseek_v2, deepseek_v3 or deepseek_v32)");
  const FamilyDefaults d = defaults_for(c.family);

  // Architecture dimensions: required (transformers has defaults, but a checkpoint without them is broken).
  c.vocab_size = f.integer("vocab_size", 0, true, 1);
  c.hidden_size = f.integer("hidden_size", 0, true, 1);
  c.intermediate_size = f.integer("intermediate_size", 0, true, 1);
  c.num_hidden_layers = f.positive_int("num_hidden_layers", 0, true);
  c.num_attention_heads = f.positive_int("num_attention_heads", 0, true);
  c.num_key_value_heads = f.positive_int("num_key_value_heads", c.num_attention_heads, false);
  if (err.empty() && !f.present("q_lora_rank")) f.fail("missing required field 'q_lora_rank' (null means no query LoRA)");
  c.q_lora_rank = f.integer("q_lora_rank", 0, false, 0);  // null (or 0) -> plain q_proj
  c.kv_lora_rank = f.integer("kv_lora_rank", 0, true, 1);
  c.qk_nope_head_dim = f.integer("qk_nope_head_dim", 0, true, 1);
  c.qk_rope_head_dim = f.integer("qk_rope_head_dim", 0, true, 1);
  c.v_head_dim = f.integer("v_head_dim", 0, true, 1);
  c.max_position_embeddings = f.integer("max_position_embeddings", d.max_position_embeddings, false, 1);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6, false, true);
  if (!err.empty()) return Status::error(err);
  if (c.num_key_value_heads != c.num_attention_heads)
    return error("config.json: field 'num_key_value_heads' (", c.num_key_value_heads,
                 ") must equal num_attention_heads (", c.num_attention_heads, ") for MLA");
  if (c.qk_rope_head_dim % 2 != 0)
    return error("config.json: field 'qk_rope_head_dim' must be even (got ", c.qk_rope_head_dim, ")");

  // MoE. n_routed_experts null or 0 means every layer is dense.
  if (err.empty() && !f.present("n_routed_experts")) f.fail("missing required field 'n_routed_experts'");
  c.n_routed_experts = f.nonneg_int("n_routed_experts", 0);
  c.first_k_dense_replace = f.nonneg_int("first_k_dense_replace", d.first_k_dense_replace);
  c.moe_layer_freq = f.positive_int("moe_layer_freq", 1, false);
  std::string topk_method = f.string("topk_method", d.topk_method, false);
  std::string scoring = f.string("scoring_func", d.scoring_func, false);
  if (c.n_routed_experts > 0) {
    c.moe_intermediate_size = f.integer("moe_intermediate_size", 0, true, 1);
    c.num_experts_per_tok = f.positive_int("num_experts_per_tok", 0, true);
    c.n_shared_experts = f.nonneg_int("n_shared_experts", d.n_shared_experts);
    c.n_group = f.positive_int("n_group", d.n_group, false);
    c.topk_group = f.positive_int("topk_group", d.topk_group, false);
    c.norm_topk_prob = f.boolean("norm_topk_prob", d.norm_topk_prob);
    c.routed_scaling_factor = f.number("routed_scaling_factor", d.routed_scaling_factor, false, true);
    if (!err.empty()) return Status::error(err);
    if (topk_method == "greedy") c.topk_method = TopkMethod::kGreedy;
    else if (topk_method == "group_limited_greedy") c.topk_method = TopkMethod::kGroupLimitedGreedy;
    else if (topk_method == "noaux_tc") c.topk_method = TopkMethod::kNoauxTc;
    else
      return error("config.json: field 'topk_method' value '", topk_method,
                   "' is not supported (expected greedy, group_limited_greedy or noaux_tc)");
    if (scoring == "softmax") c.scoring_func = ScoringFunc::kSoftmax;
    else if (scoring == "sigmoid") c.scoring_func = ScoringFunc::kSigmoid;
    else
      return error("config.json: field 'scoring_func' value '", scoring,
                   "' is not supported (expected softmax or sigmoid)");
    if (c.n_routed_experts % c.n_group != 0)
      return error("config.json: field 'n_routed_experts' (", c.n_routed_experts,
                   ") must be divisible by n_group (", c.n_group, ")");
    if (c.topk_group > c.n_group)
      return error("config.json: field 'topk_group' (", c.topk_group, ") must not exceed n_group (", c.n_group, ")");
    if (c.num_experts_per_tok > c.n_routed_experts)
      return error("config.json: field 'num_experts_per_tok' (", c.num_experts_per_tok,
                   ") must not exceed n_routed_experts (", c.n_routed_experts, ")");
    // Group-limited selection must leave at least K eligible experts.
    if (c.topk_method != TopkMethod::kGreedy &&
        static_cast<int64_t>(c.topk_group) * (c.n_routed_experts / c.n_group) < c.num_experts_per_tok)
      return error("config.json: field 'topk_group' (", c.topk_group, ") keeps fewer than num_experts_per_tok (",
                   c.num_experts_per_tok, ") experts");
  }

  parse_rope(root, f, c, &err);
  if (!err.empty()) return Status::error(err);
  c.rope_interleave = f.boolean("rope_interleave", true);

  // MTP modules (the HF alias num_mtp_layers is accepted too).
  c.num_nextn_predict_layers =
      f.nonneg_int("num_nextn_predict_layers", f.has("num_mtp_layers") ? f.nonneg_int("num_mtp_layers", 0) : 0);

  if (c.family == ModelFamily::kDeepseekV32) {
    c.index_n_heads = f.positive_int("index_n_heads", 64, false);
    c.index_head_dim = f.integer("index_head_dim", 128, false, 1);
    c.index_topk = f.positive_int("index_topk", 2048, false);
    if (!err.empty()) return Status::error(err);
    if (c.index_head_dim <= c.qk_rope_head_dim)
      return error("config.json: field 'index_head_dim' (", c.index_head_dim,
                   ") must exceed qk_rope_head_dim (", c.qk_rope_head_dim, ")");
    if (c.q_lora_rank == 0)
      return error("config.json: field 'q_lora_rank' must be set for deepseek_v32 (the indexer reads the query latent)");
  }

  // Token ids: bos int or null; eos int, list of ints, or null.
  c.bos_token_id = f.has("bos_token_id") ? f.integer("bos_token_id", -1, false, 0) : -1;
  if (f.has("eos_token_id")) {
    const json& e = root.at("eos_token_id");
    if (e.is_array()) {
      for (const json& x : e) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0) {
          f.fail_field("eos_token_id", "must be a non-negative integer or a list of them (got " + e.dump() + ")");
          break;
        }
        c.eos_token_ids.push_back(x.get<int64_t>());
      }
    } else {
      int64_t id = f.integer("eos_token_id", -1, false, 0);
      if (err.empty()) c.eos_token_ids.push_back(id);
    }
    if (err.empty() && c.eos_token_ids.empty()) f.fail_field("eos_token_id", "must not be an empty list");
    if (!c.eos_token_ids.empty()) c.eos_token_id = c.eos_token_ids[0];
  }
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);

  // Features dserve does not implement: reject instead of computing something else.
  std::string act = f.string("hidden_act", "silu", false);
  if (err.empty() && act != "silu") f.fail_field("hidden_act", "value '" + act + "' is not supported (expected \"silu\")");
  if (f.boolean("attention_bias", false)) f.fail_field("attention_bias", "must be false (biased attention projections are not supported)");
  if (f.boolean("mlp_bias", false)) f.fail_field("mlp_bias", "must be false (biased MLP projections are not supported)");

  parse_quant(root, f, c, &err);
  if (!err.empty()) return Status::error(err);
  return c;
}

Result<ModelConfig> load_model_config(const std::string& model_dir) {
  std::string path = model_dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(path, ": cannot open (", std::strerror(errno), ")");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return error(path, ": read failed");
  Result<ModelConfig> r = parse_model_config(ss.str());
  if (!r.is_ok()) {
    // Name the file the user passed, not just "config.json".
    std::string msg = r.status().message();
    if (msg.rfind("config.json:", 0) == 0) msg = path + msg.substr(std::strlen("config.json"));
    return Status::error(msg);
  }
  return r;
}

std::vector<float> ModelConfig::rope_inv_freq() const {
  // Mirrors transformers' float32 tensor arithmetic step by step (modeling_rope_utils.py), so that
  // frequencies match its inv_freq buffer; the correction range is computed in double as Python does.
  const int64_t dim = qk_rope_head_dim;
  const int64_t half = dim / 2;
  const float base = static_cast<float>(rope_theta);
  std::vector<float> pos_freqs(half), inv(half);
  for (int64_t i = 0; i < half; ++i) {
    float expo = static_cast<float>(2 * i) / static_cast<float>(dim);
    // Correctly rounded; torch's vectorised powf can differ by 1 ulp (seen for theta 50000).
    pos_freqs[i] = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(expo)));
  }
  if (rope_scaling.type != "yarn") {
    for (int64_t i = 0; i < half; ++i) inv[i] = 1.0f / pos_freqs[i];
    return inv;
  }
  const RopeScaling& r = rope_scaling;
  const float factor = static_cast<float>(r.factor);
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) *
            std::log(static_cast<double>(r.original_max_position_embeddings) / (rotations * 2 * M_PI))) /
           (2 * std::log(rope_theta));
  };
  double low = correction_dim(r.beta_fast);
  double high = correction_dim(r.beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's singularity guard
  const float range = static_cast<float>(high - low);
  const float low_f = static_cast<float>(low);
  for (int64_t i = 0; i < half; ++i) {
    float extrapolation = 1.0f / pos_freqs[i];
    float interpolation = 1.0f / (factor * pos_freqs[i]);
    float ramp = (static_cast<float>(i) - low_f) / range;
    ramp = std::min(std::max(ramp, 0.0f), 1.0f);
    float extrap_factor = 1.0f - ramp;
    float a = interpolation * (1.0f - extrap_factor);
    float b = extrapolation * extrap_factor;
    inv[i] = a + b;
  }
  return inv;
}

double ModelConfig::rope_attention_factor() const {
  if (rope_scaling.type != "yarn") return 1.0;
  const RopeScaling& r = rope_scaling;
  if (r.attention_factor != 0) return r.attention_factor;
  if (r.mscale != 0 && r.mscale_all_dim != 0)
    return yarn_get_mscale(r.factor, r.mscale) / yarn_get_mscale(r.factor, r.mscale_all_dim);
  return yarn_get_mscale(r.factor, 1.0);
}

double ModelConfig::softmax_scale() const {
  double scale = std::pow(static_cast<double>(qk_head_dim()), -0.5);
  if (rope_scaling.type != "default" && rope_scaling.mscale_all_dim != 0) {
    double m = yarn_get_mscale(rope_scaling.factor, rope_scaling.mscale_all_dim);
    scale = scale * m * m;
  }
  return scale;
}

Status check_same_architecture(const ModelConfig& a, const ModelConfig& b) {
  std::string diff;
  const auto same = [&](const char* name, const auto& x, const auto& y) {
    if (diff.empty() && !(x == y)) {
      std::ostringstream m;
      m << name << " " << y << " (the running model's: " << x << ")";
      diff = m.str();
    }
  };
  same("model family", static_cast<int>(a.family), static_cast<int>(b.family));
  same("vocab_size", a.vocab_size, b.vocab_size);
  same("hidden_size", a.hidden_size, b.hidden_size);
  same("intermediate_size", a.intermediate_size, b.intermediate_size);
  same("moe_intermediate_size", a.moe_intermediate_size, b.moe_intermediate_size);
  same("num_hidden_layers", a.num_hidden_layers, b.num_hidden_layers);
  same("num_attention_heads", a.num_attention_heads, b.num_attention_heads);
  same("num_key_value_heads", a.num_key_value_heads, b.num_key_value_heads);
  same("q_lora_rank", a.q_lora_rank, b.q_lora_rank);
  same("kv_lora_rank", a.kv_lora_rank, b.kv_lora_rank);
  same("qk_nope_head_dim", a.qk_nope_head_dim, b.qk_nope_head_dim);
  same("qk_rope_head_dim", a.qk_rope_head_dim, b.qk_rope_head_dim);
  same("v_head_dim", a.v_head_dim, b.v_head_dim);
  same("n_routed_experts", a.n_routed_experts, b.n_routed_experts);
  same("n_shared_experts", a.n_shared_experts, b.n_shared_experts);
  same("num_experts_per_tok", a.num_experts_per_tok, b.num_experts_per_tok);
  same("n_group", a.n_group, b.n_group);
  same("topk_group", a.topk_group, b.topk_group);
  same("topk_method", static_cast<int>(a.topk_method), static_cast<int>(b.topk_method));
  same("scoring_func", static_cast<int>(a.scoring_func), static_cast<int>(b.scoring_func));
  same("norm_topk_prob", a.norm_topk_prob, b.norm_topk_prob);
  same("routed_scaling_factor", a.routed_scaling_factor, b.routed_scaling_factor);
  same("first_k_dense_replace", a.first_k_dense_replace, b.first_k_dense_replace);
  same("moe_layer_freq", a.moe_layer_freq, b.moe_layer_freq);
  same("rms_norm_eps", a.rms_norm_eps, b.rms_norm_eps);
  same("rope_theta", a.rope_theta, b.rope_theta);
  same("rope_scaling type", a.rope_scaling.type, b.rope_scaling.type);
  same("rope_scaling factor", a.rope_scaling.factor, b.rope_scaling.factor);
  same("rope_scaling original_max_position_embeddings", a.rope_scaling.original_max_position_embeddings,
       b.rope_scaling.original_max_position_embeddings);
  same("rope_scaling beta_fast", a.rope_scaling.beta_fast, b.rope_scaling.beta_fast);
  same("rope_scaling beta_slow", a.rope_scaling.beta_slow, b.rope_scaling.beta_slow);
  same("rope_scaling mscale", a.rope_scaling.mscale, b.rope_scaling.mscale);
  same("rope_scaling mscale_all_dim", a.rope_scaling.mscale_all_dim, b.rope_scaling.mscale_all_dim);
  same("rope_scaling attention_factor", a.rope_scaling.attention_factor, b.rope_scaling.attention_factor);
  same("rope_scaling truncate", a.rope_scaling.truncate, b.rope_scaling.truncate);
  same("max_position_embeddings", a.max_position_embeddings, b.max_position_embeddings);
  same("rope_interleave", a.rope_interleave, b.rope_interleave);
  same("num_nextn_predict_layers", a.num_nextn_predict_layers, b.num_nextn_predict_layers);
  same("index_n_heads", a.index_n_heads, b.index_n_heads);
  same("index_head_dim", a.index_head_dim, b.index_head_dim);
  same("index_topk", a.index_topk, b.index_topk);
  same("tie_word_embeddings", a.tie_word_embeddings, b.tie_word_embeddings);
  same("FP8 quantization (quantization_config)", a.fp8.enabled, b.fp8.enabled);
  same("FP8 weight_block_size[0]", a.fp8.block_n, b.fp8.block_n);
  same("FP8 weight_block_size[1]", a.fp8.block_k, b.fp8.block_k);
  same("FP8 scale_fmt ue8m0", a.fp8.ue8m0, b.fp8.ue8m0);
  if (!diff.empty()) return error("the checkpoint is another model: ", diff);
  return Status::ok();
}

}  // namespace ds
