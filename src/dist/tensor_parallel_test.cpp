// Tensor parallelism on the CPU backend: n ranks as threads (LocalGroup), each with its shard of a fixture
// (model/tp_shard.h) and its own latent cache, give the single-rank model's logits (prefill in MHA form, decode
// steps in the absorbed form, the MTP layer) to float rounding, and the same bits on every rank.
#include <cmath>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "dist/local_group.h"
#include "model/deepseek_model.h"
#include "model/tp_shard.h"
#include "runner/attn_metadata.h"

namespace ds {
namespace {

std::string fixture(const std::string& name) { return std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name; }

Tensor ids_tensor(const std::vector<int32_t>& ids) {
  Tensor t = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::kI32);
  std::copy(ids.begin(), ids.end(), t.data_as<int32_t>());
  return t;
}

// Host copies of the logits of: the prompt's last position, each decode step, and the MTP layer's drafts over the
// prompt (where the model has one).
std::vector<std::vector<float>> run_steps(const ModelConfig& cfg, DeepseekModel& model, Ops& ops,
                                          const std::vector<int32_t>& prompt, const std::vector<int32_t>& decode) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> pages = {0, 1, 2};
  KvCache cache = make_kv_cache(ops, cfg, 64, 3, model.num_mtp_layers());
  std::vector<std::vector<float>> out;
  auto keep = [&](const Tensor& logits) {
    Tensor h = ops.to_host(logits);
    out.emplace_back(h.f32(), h.f32() + h.numel());
  };
  AttnMetadata meta = build_attn_metadata({SeqSlice{0, n, &pages}}, 64, ops);
  Tensor hidden = model.forward(ops.upload(ids_tensor(prompt)), meta, cache);  // [n, d]
  keep(model.logits(ops.select_rows(hidden, {n - 1})));
  if (model.num_mtp_layers() > 0) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i + 1 < n; ++i) rows.push_back(i);
    std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
    AttnMetadata mm = build_attn_metadata({SeqSlice{0, n - 1, &pages}}, 64, ops);
    keep(model.mtp_logits(0, model.mtp_forward(0, ops.upload(ids_tensor(next)), ops.select_rows(hidden, rows), mm,
                                               cache)));
  }
  for (size_t i = 0; i < decode.size(); ++i) {
    AttnMetadata m = build_attn_metadata({SeqSlice{n + static_cast<int64_t>(i), 1, &pages}}, 64, ops);
    keep(model.logits(model.forward(ops.upload(ids_tensor({decode[i]})), m, cache, AttnMode::kAbsorbed)));
  }
  return out;
}

class TensorParallel : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallel, RanksGiveTheSingleRankLogits) {
  const ModelConfig cfg = load_model_config(fixture(GetParam())).value();
  const ModelWeights w = load_weights(fixture(GetParam()), cfg).value();
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(45), decode(4);
  for (auto& t : prompt) t = static_cast<int32_t>(2 + rng() % 1000);
  for (auto& t : decode) t = static_cast<int32_t>(2 + rng() % 1000);
  auto ops1 = make_cpu_ops();
  DeepseekModel single(cfg, w, *ops1);
  const auto want = run_steps(cfg, single, *ops1, prompt, decode);

  for (int size : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(size));
    LocalGroup group(size);
    std::vector<std::vector<std::vector<float>>> got(size);
    std::vector<std::thread> ranks;
    for (int r = 0; r < size; ++r)
      ranks.emplace_back([&, r] {
        auto ops = make_cpu_ops();
        ops->set_collective(group.member(r));
        auto shard = shard_for_tensor_parallel(cfg, w, r, size);
        ASSERT_TRUE(shard.is_ok()) << shard.status().message();
        EXPECT_EQ(shard->config.num_attention_heads, cfg.num_attention_heads / size);
        DeepseekModel model(shard->config, shard->weights, *ops);
        got[r] = run_steps(shard->config, model, *ops, prompt, decode);
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(got[r].size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_EQ(got[r][k].size(), want[k].size());
        EXPECT_EQ(got[r][k], got[0][k]) << "rank " << r << " differs from rank 0 at step " << k;
        double worst = 0;
        for (size_t i = 0; i < want[k].size(); ++i)
          worst = std::max(worst, std::fabs(static_cast<double>(got[r][k][i]) - want[k][i]) /
                                      (1.0 + std::fabs(static_cast<double>(want[k][i]))));
        EXPECT_LE(worst, 2e-5) << "rank " << r << " step " << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallel, ::testing::Values("v2_lite", "v2", "v3", "v32"));

// What does not divide is refused with its name: 3 heads of 4, FP8 blocks cut below 128 rows.
TEST(TensorParallelShard, UndividableShapesAreRefused) {
  const ModelConfig cfg = load_model_config(fixture("v3")).value();
  const ModelWeights w = load_weights(fixture("v3"), cfg).value();
  auto three = shard_for_tensor_parallel(cfg, w, 0, 3);
  ASSERT_FALSE(three.is_ok());
  EXPECT_NE(three.status().message().find("4 attention heads"), std::string::npos) << three.status().message();
  const ModelConfig cfg8 = load_model_config(fixture("v3_fp8")).value();
  const ModelWeights w8 = load_weights(fixture("v3_fp8"), cfg8).value();
  auto fp8 = shard_for_tensor_parallel(cfg8, w8, 1, 2);
  ASSERT_FALSE(fp8.is_ok());
  EXPECT_NE(fp8.status().message().find("FP8 blocks"), std::string::npos) << fp8.status().message();
  EXPECT_FALSE(shard_for_tensor_parallel(cfg, w, 2, 2).is_ok());
}

}  // namespace
}  // namespace ds
