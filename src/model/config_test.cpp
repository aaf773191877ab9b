// Tests of config.json parsing (the four real configs, both rope spellings, every rejected case) and of the
// derived YaRN frequencies / softmax scale against the numbers in the spec (section 3.4).
#include "model/config.h"

#include "core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ds {
namespace {

using json = nlohmann::json;

std::string config_dir() { return std::string(DSERVE_SOURCE_DIR) + "/tests/data/configs"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json base_json(const std::string& name) { return json::parse(read_file(config_dir() + "/" + name)); }

ModelConfig parse_ok(const std::string& text) {
  auto r = parse_model_config(text);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r.value() : ModelConfig{};
}

ModelConfig load(const std::string& name) { return parse_ok(read_file(config_dir() + "/" + name)); }

// Applies `edit` to the V3 config and returns the parse error message ("" if it parsed).
std::string error_after(const std::function<void(json&)>& edit, const std::string& base = "deepseek-v3.json") {
  json j = base_json(base);
  edit(j);
  auto r = parse_model_config(j.dump());
  return r.is_ok() ? std::string() : r.status().message();
}

#define EXPECT_ERROR_HAS(msg, needle)                                             \
  do {                                                                            \
    std::string m_ = (msg);                                                       \
    EXPECT_NE(m_.find(needle), std::string::npos) << "message: '" << m_ << "'";   \
  } while (0)

TEST(Config, ParsesV2Lite) {
  ModelConfig c = load("deepseek-v2-lite.json");
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV2);
  EXPECT_EQ(c.model_type, "deepseek_v2");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 27);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.q_lora_rank, 0);  // null
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_head_dim(), 192);
  EXPECT_EQ(c.kv_cache_dim(), 576);
  EXPECT_EQ(c.intermediate_size, 10944);
  EXPECT_EQ(c.moe_intermediate_size, 1408);
  EXPECT_EQ(c.n_routed_experts, 64);
  EXPECT_EQ(c.n_shared_experts, 2);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.topk_group, 1);
  EXPECT_EQ(c.topk_method, TopkMethod::kGreedy);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 1.0);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_EQ(c.vocab_size, 102400);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 40);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale, 0.707);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 0.707);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_FALSE(c.has_indexer());
  EXPECT_FALSE(c.fp8.enabled);
  EXPECT_EQ(c.bos_token_id, 100000);
  EXPECT_EQ(c.eos_token_id, 100001);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{100001});
  EXPECT_FALSE(c.tie_word_embeddings);
}

// An in-place weight update needs the same model: the same config passes (token ids may differ), and any field the
// forward reads is named with both values when it differs.
TEST(Config, SameArchitectureNamesTheFirstDifference) {
  const ModelConfig v3 = load("deepseek-v3.json");
  ModelConfig same = v3;
  same.bos_token_id = 7;
  EXPECT_TRUE(check_same_architecture(v3, same).is_ok());
  EXPECT_ERROR_HAS(check_same_architecture(v3, load("deepseek-v2-lite.json")).message(), "another model");
  json j = base_json("deepseek-v3.json");
  j["routed_scaling_factor"] = 3.5;
  EXPECT_ERROR_HAS(check_same_architecture(v3, parse_ok(j.dump())).message(), "routed_scaling_factor 3.5 (the running model's: 2.5)");
  j = base_json("deepseek-v3.json");
  j["num_nextn_predict_layers"] = 0;
  EXPECT_ERROR_HAS(check_same_architecture(v3, parse_ok(j.dump())).message(), "num_nextn_predict_layers 0");
  j = base_json("deepseek-v3.json");
  j.erase("quantization_config");
  EXPECT_ERROR_HAS(check_same_architecture(v3, parse_ok(j.dump())).message(), "FP8 quantization");
}

TEST(Config, ParsesV2) {
  ModelConfig c = load("deepseek-v2.json");
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV2);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.num_attention_heads, 128);
  EXPECT_EQ(c.n_routed_experts, 160);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 3);
  EXPECT_EQ(c.topk_method, TopkMethod::kGroupLimitedGreedy);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 16.0);
  EXPECT_EQ(c.num_hidden_layers, 60);
}

TEST(Config, ParsesV3) {
  ModelConfig c = load("deepseek-v3.json");
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV3);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_EQ(c.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_FALSE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_TRUE(c.fp8.enabled);
  EXPECT_EQ(c.fp8.block_n, 128);
  EXPECT_EQ(c.fp8.block_k, 128);
  EXPECT_FALSE(c.fp8.ue8m0);
  EXPECT_EQ(c.fp8.activation_scheme, "dynamic");
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_TRUE(c.rope_interleave);
  EXPECT_FALSE(c.has_indexer());
}

TEST(Config, ParsesV32) {
  ModelConfig c = load("deepseek-v3.2-exp.json");
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV32);
  EXPECT_TRUE(c.has_indexer());
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 2048);
  EXPECT_TRUE(c.fp8.enabled);
  EXPECT_TRUE(c.fp8.ue8m0);
  EXPECT_EQ(c.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
}

// Spec 3.4 table: angles at position 1 are the inverse frequencies themselves.
TEST(Config, V3YarnFrequenciesMatchSpecTable) {
  ModelConfig c = load("deepseek-v3.json");
  std::vector<float> f = c.rope_inv_freq();
  ASSERT_EQ(f.size(), 32u);
  EXPECT_NEAR(f[0], 1.0, 1e-7);
  EXPECT_NEAR(f[10], 0.0562341, 0.0562341 * 2e-6);
  EXPECT_NEAR(f[11], 0.0390069, 0.0390069 * 2e-6);
  EXPECT_NEAR(f[16], 0.0055, 0.00005);
  EXPECT_NEAR(f[23], 3.33380e-5, 3.33380e-5 * 2e-5);
  EXPECT_NEAR(f[31], 3.33380e-6, 3.33380e-6 * 2e-5);
}

// Every frequency against the closed form of spec 3.4 evaluated in double (low 10, high 23, s = 40).
TEST(Config, V3YarnFrequenciesMatchClosedForm) {
  ModelConfig c = load("deepseek-v3.json");
  std::vector<float> f = c.rope_inv_freq();
  for (int i = 0; i < 32; ++i) {
    double base = std::pow(10000.0, -2.0 * i / 64.0);
    double ramp = std::clamp((i - 10.0) / (23.0 - 10.0), 0.0, 1.0);
    double want = base * (1 - ramp) + base / 40.0 * ramp;
    EXPECT_NEAR(f[i], want, want * 1e-6) << "i=" << i;
  }
  // The blend factors named in the spec: i = 11 -> x0.925, 16 -> x0.55, 22 -> x0.1.
  EXPECT_NEAR(f[11] / std::pow(10000.0, -22.0 / 64), 0.925, 1e-6);
  EXPECT_NEAR(f[16] / std::pow(10000.0, -32.0 / 64), 0.55, 1e-6);
  EXPECT_NEAR(f[22] / std::pow(10000.0, -44.0 / 64), 0.1, 1e-6);
}

TEST(Config, SoftmaxScaleMatchesSpec) {
  EXPECT_NEAR(load("deepseek-v3.json").softmax_scale(), 0.13523378, 5e-8);
  EXPECT_NEAR(load("deepseek-v3.2-exp.json").softmax_scale(), 0.13523378, 5e-8);
  EXPECT_NEAR(load("deepseek-v2-lite.json").softmax_scale(), 0.11472139, 5e-8);
  EXPECT_NEAR(load("deepseek-v2.json").softmax_scale(), 0.11472139, 5e-8);
  // mscale == mscale_all_dim in every released config, so cos/sin are unscaled.
  for (const char* n : {"deepseek-v3.json", "deepseek-v2-lite.json", "deepseek-v2.json", "deepseek-v3.2-exp.json"})
    EXPECT_DOUBLE_EQ(load(n).rope_attention_factor(), 1.0) << n;
}

TEST(Config, DefaultRopeIsPlain) {
  json j = base_json("deepseek-v3.json");
  j.erase("rope_scaling");
  j["rope_theta"] = 50000;
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_NEAR(c.softmax_scale(), 1.0 / std::sqrt(192.0), 1e-9);
  EXPECT_DOUBLE_EQ(c.rope_attention_factor(), 1.0);
  std::vector<float> f = c.rope_inv_freq();
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(f[i], std::pow(50000.0, -2.0 * i / 64), 1e-6 * f[i]) << i;
}

// transformers' yarn attention_factor fallbacks: no mscale pair -> 0.1 ln(s) + 1; unequal pair -> ratio.
TEST(Config, YarnAttentionFactorFallbacks) {
  json j = base_json("deepseek-v3.json");
  j["rope_scaling"].erase("mscale");
  j["rope_scaling"].erase("mscale_all_dim");
  ModelConfig c = parse_ok(j.dump());
  EXPECT_NEAR(c.rope_attention_factor(), 0.1 * std::log(40.0) + 1.0, 1e-12);
  EXPECT_NEAR(c.softmax_scale(), 1.0 / std::sqrt(192.0), 1e-12);  // no mscale_all_dim -> no m^2

  j = base_json("deepseek-v3.json");
  j["rope_scaling"]["mscale"] = 1.0;
  j["rope_scaling"]["mscale_all_dim"] = 0.5;
  c = parse_ok(j.dump());
  EXPECT_NEAR(c.rope_attention_factor(), (0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1), 1e-12);

  j["rope_scaling"]["attention_factor"] = 0.75;
  EXPECT_DOUBLE_EQ(parse_ok(j.dump()).rope_attention_factor(), 0.75);
}

// transformers >= 5 spelling: rope_parameters with rope_type (and rope_theta inside).
TEST(Config, AcceptsRopeParameters) {
  json j = base_json("deepseek-v3.json");
  json rp = j["rope_scaling"];
  rp.erase("type");
  rp["rope_type"] = "yarn";
  rp["rope_theta"] = 20000.0;
  j.erase("rope_scaling");
  j["rope_parameters"] = rp;
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_theta, 20000.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 40.0);
  EXPECT_NEAR(c.softmax_scale(), 0.13523378, 5e-8);
  EXPECT_NEAR(c.rope_inv_freq()[1], std::pow(20000.0, -2.0 / 64), 1e-6);
}

TEST(Config, YarnOptionalFieldDefaults) {
  json j = base_json("deepseek-v3.json");
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 8}};
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 163840);  // max_position_embeddings
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale, 0.0);
  EXPECT_TRUE(c.rope_scaling.truncate);
  // transformers 5.17 refuses a yarn config without a factor; so do we.
  EXPECT_ERROR_HAS(error_after([](json& j) { j["rope_scaling"].erase("factor"); }),
                   "missing required field 'rope_scaling.factor'");
}

// Values computed by transformers 5.17 itself (tests/data/configs/rope_reference.json): the inverse
// frequencies bit for bit (up to 1 ulp where powf rounding may differ), the cos/sin attention factor and
// the softmax scale, for the released configs, the fixture configs and variants of the rope fields.
TEST(Config, MatchesTransformersRope) {
  json ref = json::parse(read_file(config_dir() + "/rope_reference.json"));
  ASSERT_GE(ref["cases"].size(), 14u);
  for (const json& cs : ref["cases"]) {
    SCOPED_TRACE(cs["name"].get<std::string>());
    ModelConfig c = parse_ok(cs["config"].dump());
    std::vector<float> f = c.rope_inv_freq();
    ASSERT_EQ(f.size(), cs["inv_freq_bits"].size());
    for (size_t i = 0; i < f.size(); ++i) {
      int64_t want = cs["inv_freq_bits"][i].get<int64_t>();
      int64_t got = f32_to_bits(f[i]);
      EXPECT_LE(std::llabs(got - want), 1) << "i=" << i << " got " << f[i] << " want " << bits_to_f32(want);
    }
    EXPECT_NEAR(c.rope_attention_factor(), cs["attention_scaling"].get<double>(), 1e-14);
    EXPECT_NEAR(c.softmax_scale(), cs["softmax_scale"].get<double>(), 1e-15);
  }
}

TEST(Config, EosListAndNulls) {
  json j = base_json("deepseek-v3.json");
  j["eos_token_id"] = {1, 128805};
  j["bos_token_id"] = nullptr;
  j["q_lora_rank"] = nullptr;
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 128805}));
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.q_lora_rank, 0);
}

TEST(Config, FamilyDefaults) {
  json j = base_json("deepseek-v3.json");
  for (const char* k : {"topk_method", "scoring_func", "n_group", "topk_group", "norm_topk_prob"}) j.erase(k);
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_TRUE(c.norm_topk_prob);

  j = base_json("deepseek-v2-lite.json");
  for (const char* k : {"topk_method", "scoring_func", "n_group", "topk_group", "norm_topk_prob"}) j.erase(k);
  c = parse_ok(j.dump());
  EXPECT_EQ(c.topk_method, TopkMethod::kGreedy);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_FALSE(c.norm_topk_prob);

  j = base_json("deepseek-v3.2-exp.json");
  for (const char* k : {"index_n_heads", "index_head_dim", "index_topk"}) j.erase(k);
  c = parse_ok(j.dump());
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 2048);
}

TEST(ConfigErrors, BadJsonNamesPosition) {
  auto r = parse_model_config("{\n  \"model_type\": \"deepseek_v3\",\n  \"hidden_size\": ,\n}");
  ASSERT_FALSE(r.is_ok());
  EXPECT_ERROR_HAS(r.status().message(), "config.json: invalid JSON");
  EXPECT_ERROR_HAS(r.status().message(), "line 3");
  r = parse_model_config("[1, 2]");
  ASSERT_FALSE(r.is_ok());
  EXPECT_ERROR_HAS(r.status().message(), "top level must be a JSON object");
}

TEST(ConfigErrors, ModelType) {
  EXPECT_ERROR_HAS(error_after([](json& j) { j["model_type"] = "llama"; }), "unsupported model_type 'llama'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j.erase("model_type"); }), "missing required field 'model_type'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["model_type"] = 3; }), "field 'model_type' must be a string");
}

TEST(ConfigErrors, RequiredAndTypedFields) {
  EXPECT_ERROR_HAS(error_after([](json& j) { j.erase("kv_lora_rank"); }), "missing required field 'kv_lora_rank'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["kv_lora_rank"] = "512"; }),
                   "config.json: field 'kv_lora_rank' must be a positive integer");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["kv_lora_rank"] = 0; }), "field 'kv_lora_rank' must be a positive integer");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["kv_lora_rank"] = 512.5; }), "field 'kv_lora_rank' must be a positive integer");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["hidden_size"] = -7168; }), "field 'hidden_size' must be a positive integer");
  // Integral floats far outside int64 (found by fuzz_config: the cast itself was undefined behaviour).
  EXPECT_ERROR_HAS(error_after([](json& j) { j["num_hidden_layers"] = 1e300; }),
                   "field 'num_hidden_layers' must be a positive integer");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["hidden_size"] = -1e19; }), "field 'hidden_size' must be a positive integer");
  EXPECT_ERROR_HAS(error_after([](json& j) { j.erase("vocab_size"); }), "missing required field 'vocab_size'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j.erase("q_lora_rank"); }), "missing required field 'q_lora_rank'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["q_lora_rank"] = "x"; }), "field 'q_lora_rank'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j.erase("n_routed_experts"); }), "missing required field 'n_routed_experts'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j.erase("moe_intermediate_size"); }),
                   "missing required field 'moe_intermediate_size'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["rms_norm_eps"] = "tiny"; }), "field 'rms_norm_eps' must be a number");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["norm_topk_prob"] = "yes"; }),
                   "field 'norm_topk_prob' must be true or false");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["routed_scaling_factor"] = 0; }),
                   "field 'routed_scaling_factor' must be a positive number");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["num_nextn_predict_layers"] = -1; }),
                   "field 'num_nextn_predict_layers' must be a non-negative integer");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["qk_rope_head_dim"] = 63; }), "field 'qk_rope_head_dim' must be even");
}

TEST(ConfigErrors, UnsupportedValues) {
  EXPECT_ERROR_HAS(error_after([](json& j) { j["topk_method"] = "random"; }), "field 'topk_method' value 'random'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["scoring_func"] = "relu"; }), "field 'scoring_func' value 'relu'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["hidden_act"] = "gelu"; }), "field 'hidden_act' value 'gelu'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["attention_bias"] = true; }), "field 'attention_bias' must be false");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["num_key_value_heads"] = 16; }), "field 'num_key_value_heads' (16)");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["n_group"] = 7; }),
                   "field 'n_routed_experts' (256) must be divisible by n_group (7)");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["topk_group"] = 9; }), "field 'topk_group' (9) must not exceed n_group");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["num_experts_per_tok"] = 300; }), "field 'num_experts_per_tok' (300)");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["rope_scaling"]["type"] = "linear"; }),
                   "field 'rope_scaling.type' value 'linear' is not supported");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["rope_scaling"]["factor"] = "forty"; }),
                   "field 'rope_scaling.factor' must be a number");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["rope_scaling"] = 5; }), "field 'rope_scaling' must be an object");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["eos_token_id"] = "eos"; }), "field 'eos_token_id'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["eos_token_id"] = {1, "x"}; }), "field 'eos_token_id'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["eos_token_id"] = json::array(); }), "field 'eos_token_id'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["q_lora_rank"] = nullptr; }, "deepseek-v3.2-exp.json"),
                   "field 'q_lora_rank' must be set for deepseek_v32");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["index_head_dim"] = 32; }, "deepseek-v3.2-exp.json"),
                   "field 'index_head_dim' (32) must exceed qk_rope_head_dim");
}

TEST(ConfigErrors, Quantization) {
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"]["quant_method"] = "awq"; }),
                   "field 'quantization_config.quant_method' value 'awq' is not supported");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"].erase("quant_method"); }),
                   "missing required field 'quantization_config.quant_method'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"]["weight_block_size"] = {128}; }),
                   "field 'quantization_config.weight_block_size' must be a list of 2 positive integers");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"]["weight_block_size"] = {128, "x"}; }),
                   "field 'quantization_config.weight_block_size' must be a list of 2 positive integers");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"]["weight_block_size"] = {128, 0}; }),
                   "field 'quantization_config.weight_block_size'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"]["scale_fmt"] = "e8m0x"; }),
                   "field 'quantization_config.scale_fmt' value 'e8m0x'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"]["activation_scheme"] = "static"; }),
                   "field 'quantization_config.activation_scheme' value 'static'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"]["fmt"] = "int8"; }),
                   "field 'quantization_config.fmt' value 'int8'");
  EXPECT_ERROR_HAS(error_after([](json& j) { j["quantization_config"] = "fp8"; }),
                   "field 'quantization_config' must be an object");
  // A non-default block size is carried through.
  json j = base_json("deepseek-v3.json");
  j["quantization_config"]["weight_block_size"] = {64, 32};
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.fp8.block_n, 64);
  EXPECT_EQ(c.fp8.block_k, 32);
}

TEST(ConfigErrors, LoadMissingDirectory) {
  auto r = load_model_config("/nonexistent/dserve-model");
  ASSERT_FALSE(r.is_ok());
  EXPECT_ERROR_HAS(r.status().message(), "/nonexistent/dserve-model/config.json: cannot open");
}

TEST(Config, LoadFromDirectory) {
  // load_model_config reads DIR/config.json; write one into a temp dir.
  std::string dir = ::testing::TempDir() + "/cfg_load_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << read_file(config_dir() + "/deepseek-v2-lite.json");
  auto r = load_model_config(dir);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->hidden_size, 2048);
}

}  // namespace
}  // namespace ds
