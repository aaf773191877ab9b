// Tests of load_weights on the real fixtures (tests/fixtures, written by transformers), on malformed copies of
// them (each error message names the tensor/file/problem), and of make_dummy_weights.
#include "model/weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "model/safetensors.h"

namespace ds {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using TensorList = std::vector<std::pair<std::string, Tensor>>;

#define EXPECT_ERROR_HAS(msg, needle)                                           \
  do {                                                                          \
    std::string m_ = (msg);                                                     \
    EXPECT_NE(m_.find(needle), std::string::npos) << "message: '" << m_ << "'"; \
  } while (0)

std::string fixture(const std::string& name) { return std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name; }

std::string test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path d = fs::path(::testing::TempDir()) / "dserve_w" / (std::string(info->test_suite_name()) + "." + info->name());
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

ModelConfig config_of(const std::string& dir) {
  auto c = load_model_config(dir);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? c.value() : ModelConfig{};
}

ModelWeights load_ok(const std::string& dir, const LoadOptions& opts = {}) {
  auto w = load_weights(dir, config_of(dir), opts);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  return w.is_ok() ? std::move(w).value() : ModelWeights{};
}

std::string load_error(const std::string& dir) {
  auto c = load_model_config(dir);
  if (!c.is_ok()) return c.status().message();
  auto w = load_weights(dir, c.value());
  return w.is_ok() ? std::string("(loaded fine)") : w.status().message();
}

// Every tensor of a fixture, in name order.
TensorList fixture_tensors(const std::string& name) {
  auto ck = Checkpoint::open(fixture(name));
  EXPECT_TRUE(ck.is_ok()) << ck.status().message();
  TensorList out;
  for (const std::string& n : ck->names()) out.push_back({n, ck->get(n).value()});
  return out;
}

// A single-file copy of fixture `name` in a fresh dir, after `edit` on its tensors and `edit_cfg` on its config.
std::string clone(const std::string& name, const std::function<void(TensorList&)>& edit,
                  const std::function<void(json&)>& edit_cfg = nullptr) {
  std::string dir = test_dir();
  TensorList ts = fixture_tensors(name);
  if (edit) edit(ts);
  EXPECT_TRUE(save_safetensors(dir + "/model.safetensors", ts).is_ok());
  std::ifstream in(fixture(name) + "/config.json");
  json cfg = json::parse(in);
  if (edit_cfg) edit_cfg(cfg);
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  return dir;
}

void drop(TensorList& ts, const std::string& name) {
  size_t before = ts.size();
  std::erase_if(ts, [&](const auto& p) { return p.first == name; });
  ASSERT_EQ(ts.size() + 1, before) << name;
}
void replace(TensorList& ts, const std::string& name, Tensor t) {
  for (auto& p : ts)
    if (p.first == name) {
      p.second = std::move(t);
      return;
    }
  FAIL() << "no tensor " << name;
}
Tensor find(const TensorList& ts, const std::string& name) {
  for (const auto& p : ts)
    if (p.first == name) return p.second;
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// ---- the fixtures -------------------------------------------------------------------------------------

TEST(LoadFixture, V2Lite) {
  ModelWeights w = load_ok(fixture("v2_lite"));
  EXPECT_EQ(w.embed.shape(), (Shape{1024, 192}));
  EXPECT_EQ(w.embed.dtype(), DType::kBF16);
  EXPECT_EQ(w.final_norm.shape(), (Shape{192}));
  EXPECT_EQ(w.lm_head.weight.shape(), (Shape{1024, 192}));
  ASSERT_EQ(w.layers.size(), 3u);
  const LayerWeights& l0 = w.layers[0];
  EXPECT_FALSE(l0.is_moe);
  EXPECT_EQ(l0.attn.q_proj.weight.shape(), (Shape{4 * 48, 192}));  // no q LoRA
  EXPECT_FALSE(l0.attn.q_a_proj.defined());
  EXPECT_EQ(l0.attn.kv_a_proj.weight.shape(), (Shape{64 + 16, 192}));
  EXPECT_EQ(l0.attn.kv_b_proj.weight.shape(), (Shape{4 * 64, 64}));
  EXPECT_EQ(l0.attn.o_proj.weight.shape(), (Shape{192, 4 * 32}));
  EXPECT_EQ(l0.dense.gate.weight.shape(), (Shape{256, 192}));
  EXPECT_EQ(l0.dense.down.weight.shape(), (Shape{192, 256}));
  const LayerWeights& l2 = w.layers[2];
  EXPECT_TRUE(l2.is_moe);
  EXPECT_EQ(l2.moe.router.shape(), (Shape{16, 192}));
  EXPECT_FALSE(l2.moe.correction_bias.defined());  // greedy softmax routing has none
  ASSERT_EQ(l2.moe.experts.size(), 16u);
  EXPECT_EQ(l2.moe.experts[15].up.weight.shape(), (Shape{64, 192}));
  EXPECT_EQ(l2.moe.shared.gate.weight.shape(), (Shape{2 * 64, 192}));  // 2 shared experts, fused
  EXPECT_FALSE(l2.attn.o_proj.is_block_fp8());
  EXPECT_FALSE(l2.indexer.defined());
  EXPECT_TRUE(w.mtp.empty());
}

TEST(LoadFixture, V2ShardedMatchesTheShards) {
  ModelWeights w = load_ok(fixture("v2"));
  ASSERT_EQ(w.layers.size(), 3u);
  EXPECT_EQ(w.layers[1].attn.q_a_proj.weight.shape(), (Shape{96, 192}));
  EXPECT_EQ(w.layers[1].attn.q_a_norm.shape(), (Shape{96}));
  EXPECT_EQ(w.layers[1].attn.q_b_proj.weight.shape(), (Shape{4 * 48, 96}));
  EXPECT_FALSE(w.layers[1].attn.q_proj.defined());
  // Tensors come from the right shard (README: shard 1 embedding + layers 0-1, shard 2 layer 2 + norm + head).
  auto s1 = SafetensorsFile::open(fixture("v2") + "/model-00001-of-00002.safetensors");
  auto s2 = SafetensorsFile::open(fixture("v2") + "/model-00002-of-00002.safetensors");
  ASSERT_TRUE(s1.is_ok() && s2.is_ok());
  EXPECT_TRUE(same_bytes(w.embed, (*s1)->get("model.embed_tokens.weight").value()));
  EXPECT_TRUE(same_bytes(w.lm_head.weight, (*s2)->get("lm_head.weight").value()));
  EXPECT_TRUE(same_bytes(w.layers[2].moe.experts[3].down.weight,
                         (*s2)->get("model.layers.2.mlp.experts.3.down_proj.weight").value()));
}

TEST(LoadFixture, V3WithMtp) {
  ModelWeights w = load_ok(fixture("v3"));
  const LayerWeights& l1 = w.layers[1];
  ASSERT_TRUE(l1.is_moe);
  EXPECT_EQ(l1.moe.correction_bias.dtype(), DType::kF32);
  EXPECT_EQ(l1.moe.correction_bias.shape(), (Shape{16}));
  EXPECT_EQ(l1.moe.shared.down.weight.shape(), (Shape{192, 64}));
  ASSERT_EQ(w.mtp.size(), 1u);
  const MtpWeights& m = w.mtp[0];
  EXPECT_EQ(m.enorm.shape(), (Shape{192}));
  EXPECT_EQ(m.hnorm.shape(), (Shape{192}));
  EXPECT_EQ(m.eh_proj.weight.shape(), (Shape{192, 384}));
  EXPECT_EQ(m.shared_head_norm.shape(), (Shape{192}));
  EXPECT_EQ(m.shared_head.weight.shape(), (Shape{1024, 192}));
  EXPECT_TRUE(m.layer.is_moe);
  EXPECT_EQ(m.layer.moe.experts.size(), 16u);
  EXPECT_TRUE(m.layer.moe.correction_bias.defined());
  // The stored copies are loaded (README: equal in value to the main embedding and head).
  auto ck = Checkpoint::open(fixture("v3"));
  ASSERT_TRUE(ck.is_ok());
  EXPECT_TRUE(same_bytes(m.embed, ck->get("model.layers.3.embed_tokens.weight").value()));
  EXPECT_TRUE(same_bytes(m.embed, w.embed));
  EXPECT_TRUE(same_bytes(m.layer.attn.kv_b_proj.weight, ck->get("model.layers.3.self_attn.kv_b_proj.weight").value()));

  ModelWeights no_mtp = load_ok(fixture("v3"), LoadOptions{.load_mtp = false});
  EXPECT_TRUE(no_mtp.mtp.empty());
}

TEST(LoadFixture, V3Fp8HasScalesAndDequantizesToV3) {
  ModelWeights q = load_ok(fixture("v3_fp8"));
  ModelWeights ref = load_ok(fixture("v3"));
  const AttentionWeights& a = q.layers[1].attn;
  EXPECT_EQ(a.kv_a_proj.weight.dtype(), DType::kF8E4M3);
  EXPECT_EQ(a.kv_a_proj.scale_inv.dtype(), DType::kF32);
  EXPECT_EQ(a.kv_a_proj.scale_inv.shape(), (Shape{1, 2}));  // [80, 192] ragged in both dims
  EXPECT_EQ(a.o_proj.scale_inv.shape(), (Shape{2, 1}));      // [192, 128]
  EXPECT_EQ(a.o_proj.block_n, 128);
  EXPECT_EQ(a.o_proj.block_k, 128);
  EXPECT_TRUE(q.layers[0].dense.down.is_block_fp8());
  EXPECT_TRUE(q.layers[2].moe.experts[7].gate.is_block_fp8());
  EXPECT_TRUE(q.layers[2].moe.shared.up.is_block_fp8());
  EXPECT_FALSE(q.lm_head.is_block_fp8());
  EXPECT_EQ(q.layers[1].moe.router.dtype(), DType::kBF16);
  ASSERT_EQ(q.mtp.size(), 1u);
  EXPECT_FALSE(q.mtp[0].eh_proj.is_block_fp8());
  EXPECT_TRUE(q.mtp[0].layer.attn.q_b_proj.is_block_fp8());

  // Same master weights as v3: fp8 * scale[i/128, j/128] must reproduce them to e4m3 precision, which
  // checks the scale indexing (a transposed or row-major-misread grid would be far off).
  auto check = [](const LinearWeight& lq, const LinearWeight& lr, const char* what) {
    ASSERT_TRUE(lq.is_block_fp8()) << what;
    const int64_t out = lq.out_features(), in = lq.in_features();
    const int64_t sk = lq.scale_inv.dim(1);
    const uint8_t* wq = lq.weight.data_as<uint8_t>();
    const float* s = lq.scale_inv.f32();
    for (int64_t i = 0; i < out; ++i)
      for (int64_t j = 0; j < in; ++j) {
        float scale = s[(i / 128) * sk + j / 128];
        float deq = fp8e4m3_to_f32(wq[i * in + j]) * scale;
        float want = load_as_f32(lr.weight.data(), lr.weight.dtype(), static_cast<size_t>(i * in + j));
        float tol = std::fabs(want) / 15.0f + scale * 0.002f + 1e-8f;  // 3 mantissa bits + subnormal step
        ASSERT_LE(std::fabs(deq - want), tol) << what << " [" << i << ", " << j << "]";
      }
  };
  check(q.layers[1].attn.kv_a_proj, ref.layers[1].attn.kv_a_proj, "kv_a_proj");
  check(q.layers[1].attn.o_proj, ref.layers[1].attn.o_proj, "o_proj");
  check(q.layers[0].dense.gate, ref.layers[0].dense.gate, "dense.gate");
  check(q.layers[2].moe.experts[5].down, ref.layers[2].moe.experts[5].down, "experts.5.down");
}

TEST(LoadFixture, V32Indexer) {
  ModelWeights w = load_ok(fixture("v32"));
  ASSERT_EQ(w.layers.size(), 3u);
  for (const LayerWeights& l : w.layers) {
    ASSERT_TRUE(l.indexer.defined());
    EXPECT_EQ(l.indexer.wq_b.weight.shape(), (Shape{16 * 32, 96}));
    EXPECT_EQ(l.indexer.wk.weight.shape(), (Shape{32, 192}));
    EXPECT_EQ(l.indexer.k_norm_weight.shape(), (Shape{32}));
    EXPECT_EQ(l.indexer.k_norm_bias.shape(), (Shape{32}));
    EXPECT_EQ(l.indexer.weights_proj.weight.shape(), (Shape{16, 192}));
  }
  EXPECT_TRUE(w.mtp.empty());
}

// ---- malformed checkpoints ----------------------------------------------------------------------------

TEST(LoadErrors, MissingTensor) {
  std::string dir = clone("v3", [](TensorList& ts) { drop(ts, "model.norm.weight"); });
  EXPECT_ERROR_HAS(load_error(dir), "tensor 'model.norm.weight' not found in " + dir);
  dir = clone("v3", [](TensorList& ts) { drop(ts, "model.layers.2.mlp.experts.11.up_proj.weight"); });
  EXPECT_ERROR_HAS(load_error(dir), "tensor 'model.layers.2.mlp.experts.11.up_proj.weight' not found");
  dir = clone("v3", [](TensorList& ts) { drop(ts, "model.layers.1.mlp.gate.e_score_correction_bias"); });
  EXPECT_ERROR_HAS(load_error(dir), "tensor 'model.layers.1.mlp.gate.e_score_correction_bias' not found");
}

TEST(LoadErrors, WrongShape) {
  std::string dir = clone("v3", [](TensorList& ts) {
    replace(ts, "model.layers.1.self_attn.kv_b_proj.weight", Tensor::zeros({128, 64}, DType::kBF16));
  });
  EXPECT_ERROR_HAS(load_error(dir),
                   "model.safetensors: tensor 'model.layers.1.self_attn.kv_b_proj.weight' has shape [128, 64], "
                   "expected [256, 64]");
  dir = clone("v3", [](TensorList& ts) { replace(ts, "model.norm.weight", Tensor::zeros({191}, DType::kBF16)); });
  EXPECT_ERROR_HAS(load_error(dir), "tensor 'model.norm.weight' has shape [191], expected [192]");
  // The config disagrees with the checkpoint: every tensor is checked against config dims.
  dir = clone("v3", nullptr, [](json& c) { c["kv_lora_rank"] = 32; });
  EXPECT_ERROR_HAS(load_error(dir), "expected [");
}

TEST(LoadErrors, WrongDtype) {
  std::string dir = clone("v3", [](TensorList& ts) { replace(ts, "model.norm.weight", Tensor::zeros({192}, DType::kI32)); });
  EXPECT_ERROR_HAS(load_error(dir), "tensor 'model.norm.weight' has dtype I32, expected BF16, F16 or F32");
}

TEST(LoadErrors, Fp8WithoutScale) {
  std::string dir = clone("v3_fp8", [](TensorList& ts) { drop(ts, "model.layers.1.self_attn.o_proj.weight_scale_inv"); });
  EXPECT_ERROR_HAS(load_error(dir),
                   "tensor 'model.layers.1.self_attn.o_proj.weight' is F8_E4M3 but "
                   "'model.layers.1.self_attn.o_proj.weight_scale_inv' is missing");
}

TEST(LoadErrors, ScaleOfWrongShapeOrDtype) {
  std::string dir = clone("v3_fp8", [](TensorList& ts) {
    replace(ts, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight_scale_inv", Tensor::zeros({2, 2}, DType::kF32));
  });
  EXPECT_ERROR_HAS(load_error(dir),
                   "tensor 'model.layers.1.self_attn.kv_a_proj_with_mqa.weight_scale_inv' has shape [2, 2], "
                   "expected [1, 2]");
  // A block size in the config changes the expected grid.
  dir = clone("v3_fp8", nullptr, [](json& c) { c["quantization_config"]["weight_block_size"] = {64, 64}; });
  EXPECT_ERROR_HAS(load_error(dir), "_scale_inv' has shape [");
  dir = clone("v3_fp8", [](TensorList& ts) {
    replace(ts, "model.layers.0.mlp.up_proj.weight_scale_inv", Tensor::zeros({2, 2}, DType::kBF16));
  });
  EXPECT_ERROR_HAS(load_error(dir), "tensor 'model.layers.0.mlp.up_proj.weight_scale_inv' has dtype BF16, expected F32");
}

TEST(LoadErrors, ScaleBesideNonFp8Weight) {
  std::string dir = clone("v3", [](TensorList& ts) {
    ts.push_back({"model.layers.0.self_attn.o_proj.weight_scale_inv", Tensor::zeros({2, 1}, DType::kF32)});
  });
  EXPECT_ERROR_HAS(load_error(dir), "tensor 'model.layers.0.self_attn.o_proj.weight' has dtype BF16 but");
}

TEST(LoadErrors, BrokenFiles) {
  std::string dir = clone("v2_lite", nullptr);
  // Truncated: cut inside the header length.
  fs::resize_file(dir + "/model.safetensors", 5);
  EXPECT_ERROR_HAS(load_error(dir), "model.safetensors: truncated");
  // Header length beyond the file.
  {
    std::ofstream out(dir + "/model.safetensors", std::ios::binary | std::ios::trunc);
    const char len[8] = {0x00, 0x28, 0x6b, static_cast<char>(0xee), 0, 0, 0, 0};  // 4000000000
    out.write(len, 8);
    out << "{}";
  }
  EXPECT_ERROR_HAS(load_error(dir), "model.safetensors: header length 4000000000 exceeds file size 10");
  // Bad JSON header.
  {
    std::ofstream out(dir + "/model.safetensors", std::ios::binary | std::ios::trunc);
    const char len[8] = {6, 0, 0, 0, 0, 0, 0, 0};
    out.write(len, 8);
    out << "{\"a\":]";
  }
  EXPECT_ERROR_HAS(load_error(dir), "model.safetensors: invalid JSON header");
}

TEST(LoadErrors, BadConfig) {
  std::string dir = clone("v2_lite", nullptr);
  std::ofstream(dir + "/config.json", std::ios::trunc) << "{\"model_type\": \"deepseek_v2\",";
  EXPECT_ERROR_HAS(load_error(dir), dir + "/config.json: invalid JSON");
  dir = clone("v2_lite", nullptr, [](json& c) { c["model_type"] = "mixtral"; });
  EXPECT_ERROR_HAS(load_error(dir), "unsupported model_type 'mixtral'");
}

TEST(LoadErrors, ShardedIndexPointsToMissingFile) {
  std::string dir = test_dir();
  for (const char* f : {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"})
    fs::copy_file(fixture("v2") + "/" + f, dir + "/" + f);
  EXPECT_ERROR_HAS(load_error(dir), "maps to missing file 'model-00002-of-00002.safetensors'");
}

// ---- accepted variants -------------------------------------------------------------------------------

TEST(LoadVariants, MtpHeadAndEmbeddingFallBackToMain) {
  std::string dir = clone("v3", [](TensorList& ts) {
    drop(ts, "model.layers.3.shared_head.head.weight");
    drop(ts, "model.layers.3.embed_tokens.weight");
  });
  ModelWeights w = load_ok(dir);
  ASSERT_EQ(w.mtp.size(), 1u);
  EXPECT_EQ(w.mtp[0].shared_head.weight.data(), w.lm_head.weight.data());
  EXPECT_EQ(w.mtp[0].embed.data(), w.embed.data());
}

TEST(LoadVariants, NoStoredMtpLayer) {
  std::string dir = clone("v3", [](TensorList& ts) {
    std::erase_if(ts, [](const auto& p) { return p.first.rfind("model.layers.3.", 0) == 0; });
  });
  ModelWeights w = load_ok(dir);  // config still says num_nextn_predict_layers 1
  EXPECT_TRUE(w.mtp.empty());
  EXPECT_EQ(w.layers.size(), 3u);
}

TEST(LoadVariants, TiedEmbeddingsAndOtherFloatDtypes) {
  TensorList orig = fixture_tensors("v3");
  std::string dir = clone(
      "v3",
      [](TensorList& ts) {
        drop(ts, "lm_head.weight");
        replace(ts, "model.norm.weight", to_f32(find(ts, "model.norm.weight")));
        Tensor b = find(ts, "model.layers.1.mlp.gate.e_score_correction_bias");
        Tensor b16 = Tensor::empty(b.shape(), DType::kBF16);
        for (int64_t i = 0; i < b.numel(); ++i) b16.data_as<uint16_t>()[i] = f32_to_bf16(b.f32()[i]);
        replace(ts, "model.layers.1.mlp.gate.e_score_correction_bias", b16);
      },
      [](json& c) { c["tie_word_embeddings"] = true; });
  ModelWeights w = load_ok(dir);
  EXPECT_EQ(w.lm_head.weight.data(), w.embed.data());
  EXPECT_EQ(w.final_norm.dtype(), DType::kF32);
  EXPECT_TRUE(same_bytes(w.final_norm, to_f32(find(orig, "model.norm.weight"))));
  EXPECT_EQ(w.layers[1].moe.correction_bias.dtype(), DType::kBF16);
}

// ---- dummy weights -----------------------------------------------------------------------------------

// Flattens every tensor of a ModelWeights, labelled by role, for structural comparison.
TensorList flatten(const ModelWeights& w) {
  TensorList out;
  auto lin = [&](const std::string& n, const LinearWeight& l) {
    out.push_back({n, l.weight});
    out.push_back({n + ".scale", l.scale_inv});
  };
  auto mlp = [&](const std::string& n, const MlpWeights& m) {
    lin(n + ".gate", m.gate);
    lin(n + ".up", m.up);
    lin(n + ".down", m.down);
  };
  auto layer = [&](const std::string& p, const LayerWeights& l) {
    out.push_back({p + "in_norm", l.input_norm});
    out.push_back({p + "post_norm", l.post_attn_norm});
    const AttentionWeights& a = l.attn;
    lin(p + "q_proj", a.q_proj);
    lin(p + "q_a", a.q_a_proj);
    out.push_back({p + "q_a_norm", a.q_a_norm});
    lin(p + "q_b", a.q_b_proj);
    lin(p + "kv_a", a.kv_a_proj);
    out.push_back({p + "kv_a_norm", a.kv_a_norm});
    lin(p + "kv_b", a.kv_b_proj);
    lin(p + "o", a.o_proj);
    lin(p + "ix.wq_b", l.indexer.wq_b);
    lin(p + "ix.wk", l.indexer.wk);
    out.push_back({p + "ix.k_norm", l.indexer.k_norm_weight});
    out.push_back({p + "ix.k_bias", l.indexer.k_norm_bias});
    lin(p + "ix.weights_proj", l.indexer.weights_proj);
    out.push_back({p + (l.is_moe ? "moe" : "dense"), Tensor()});
    mlp(p + "dense", l.dense);
    out.push_back({p + "router", l.moe.router});
    out.push_back({p + "bias", l.moe.correction_bias});
    for (size_t e = 0; e < l.moe.experts.size(); ++e) mlp(p + "e" + std::to_string(e), l.moe.experts[e]);
    mlp(p + "shared", l.moe.shared);
  };
  out.push_back({"embed", w.embed});
  out.push_back({"norm", w.final_norm});
  lin("lm_head", w.lm_head);
  for (size_t i = 0; i < w.layers.size(); ++i) layer(std::string("L").append(std::to_string(i)).append("."), w.layers[i]);
  for (size_t i = 0; i < w.mtp.size(); ++i) {
    const MtpWeights& m = w.mtp[i];
    std::string p = std::string("M").append(std::to_string(i)).append(".");
    out.push_back({p + "enorm", m.enorm});
    out.push_back({p + "hnorm", m.hnorm});
    lin(p + "eh", m.eh_proj);
    layer(p, m.layer);
    out.push_back({p + "head_norm", m.shared_head_norm});
    lin(p + "head", m.shared_head);
    out.push_back({p + "embed", m.embed});
  }
  return out;
}

// The dummy weights have exactly the structure, shapes and FP8-ness that transformers wrote for each fixture.
TEST(DummyWeights, SameStructureAsFixtures) {
  for (const char* name : {"v2_lite", "v2", "v3", "v3_fp8", "v32", "v3_fp8_h256"}) {
    SCOPED_TRACE(name);
    ModelConfig cfg = config_of(fixture(name));
    TensorList real = flatten(load_ok(fixture(name)));
    TensorList dummy = flatten(make_dummy_weights(cfg, 7));
    ASSERT_EQ(real.size(), dummy.size());
    for (size_t i = 0; i < real.size(); ++i) {
      ASSERT_EQ(real[i].first, dummy[i].first);
      const Tensor &r = real[i].second, &d = dummy[i].second;
      ASSERT_EQ(r.defined(), d.defined()) << real[i].first;
      if (!r.defined()) continue;
      EXPECT_EQ(r.shape(), d.shape()) << real[i].first;
      EXPECT_EQ(r.dtype() == DType::kF8E4M3, d.dtype() == DType::kF8E4M3) << real[i].first;
      EXPECT_EQ(r.dtype() == DType::kF32, d.dtype() == DType::kF32) << real[i].first;  // scales, router bias
    }
  }
}

TEST(DummyWeights, DeterministicPerSeedAndSensiblyScaled) {
  ModelConfig cfg = config_of(fixture("v3_fp8"));
  ModelWeights a = make_dummy_weights(cfg, 1), b = make_dummy_weights(cfg, 1), c = make_dummy_weights(cfg, 2);
  TensorList fa = flatten(a), fb = flatten(b), fc = flatten(c);
  size_t differing = 0, compared = 0;
  for (size_t i = 0; i < fa.size(); ++i) {
    if (!fa[i].second.defined()) continue;
    EXPECT_TRUE(same_bytes(fa[i].second, fb[i].second)) << fa[i].first;
    ++compared;
    if (!same_bytes(fa[i].second, fc[i].second)) ++differing;
  }
  EXPECT_EQ(differing, compared);  // every tensor depends on the seed

  // Dequantized FP8 linears and BF16 linears have std ~0.02; norms are ~1.
  auto stats = [](const LinearWeight& l) {
    double s2 = 0;
    int64_t n = l.weight.numel(), in = l.in_features(), sk = l.scale_inv.defined() ? l.scale_inv.dim(1) : 0;
    for (int64_t k = 0; k < n; ++k) {
      double v = load_as_f32(l.weight.data(), l.weight.dtype(), static_cast<size_t>(k));
      if (l.is_block_fp8()) v *= l.scale_inv.f32()[(k / in / l.block_n) * sk + (k % in) / l.block_k];
      s2 += v * v;
    }
    return std::sqrt(s2 / n);
  };
  EXPECT_TRUE(a.layers[1].attn.kv_b_proj.is_block_fp8());
  EXPECT_NEAR(stats(a.layers[1].attn.kv_b_proj), 0.02, 0.004);
  EXPECT_NEAR(stats(a.layers[2].moe.experts[0].down), 0.02, 0.004);
  EXPECT_FALSE(a.lm_head.is_block_fp8());
  EXPECT_NEAR(stats(a.lm_head), 0.02, 0.002);
  for (int64_t i = 0; i < 192; ++i) EXPECT_NEAR(load_as_f32(a.final_norm.data(), a.final_norm.dtype(), i), 1.0, 0.02);
  // MTP is built on request and shares the main embedding and head.
  ASSERT_EQ(a.mtp.size(), 1u);
  EXPECT_EQ(a.mtp[0].embed.data(), a.embed.data());
  EXPECT_EQ(a.mtp[0].shared_head.weight.data(), a.lm_head.weight.data());
  EXPECT_TRUE(make_dummy_weights(cfg, 1, /*with_mtp=*/false).mtp.empty());
}

}  // namespace
}  // namespace ds
